"""The hardened server mode (``vaultsync serve VAULT --manifest PATH``): the operator's manifest,
safe-spawn checks, the role filter, the audit log and provenance receipts."""
