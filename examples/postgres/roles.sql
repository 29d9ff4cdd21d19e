-- examples/postgres/roles.sql — the database roles of a team's vaults, each with the least it needs.
--
--   vaultsync_owner   the watchers' role: owns the schema, creates and writes its tables (and runs `vaultsync migrate`)
--   vaultsync_reader  the servers' role: reads every table, and moves the audit log's head (audit_heads) when a
--                     server keeps an audit log (audit_log_path); it cannot record, change or delete a note
--
-- Run the first part once as a superuser, in the team's database:
--   psql "postgresql://postgres@db.internal:5432/team" -f roles.sql        (then \password each role)
-- The connection strings then select the schema: ...?options=-csearch_path%3Dvaultsync (see vaultsync.env).

CREATE ROLE vaultsync_owner LOGIN;
CREATE ROLE vaultsync_reader LOGIN;
CREATE SCHEMA vaultsync AUTHORIZATION vaultsync_owner;
GRANT USAGE ON SCHEMA vaultsync TO vaultsync_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE vaultsync_owner IN SCHEMA vaultsync GRANT SELECT ON TABLES TO vaultsync_reader;
REVOKE ALL ON SCHEMA public FROM PUBLIC;

-- after the tables exist
-- Run this part once the first watcher has started (or `vaultsync migrate` ran as vaultsync_owner). Servers with
-- audit_log_path append each call to the log and move its head in the database in one step.
GRANT SELECT ON ALL TABLES IN SCHEMA vaultsync TO vaultsync_reader;
GRANT INSERT, UPDATE ON vaultsync.audit_heads TO vaultsync_reader;
