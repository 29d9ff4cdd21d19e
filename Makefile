# Two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test deps compat-doc test-semantic bench bundle clean browser proxy system lint check docs docs-gen

# The installs use uv (from PyPI, into .venv): it fetches and unpacks in parallel, about 15 s here for what pip took
# 60-90 s over, which is most of what `make test` on a fresh clone spent before the first test. Only these
# installs use it; vaultsync itself installs with plain pip (`pip install .`).
UV := $(BIN)/uv
$(STAMP): pyproject.toml tests/constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	$(UV) pip install --quiet --python $(BIN)/python -c tests/constraints.txt -e '.[dev,docs,semantic,postgres]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The client compatibility matrix (tests/server/test_compat_matrix.py, docs/compatibility.md) needs clients that cannot
# live in .venv: the TypeScript MCP SDK, current and an older minor line (npm aliases in tests/js; skipped
# without Node.js), and the newest Python MCP SDK 1.x in its own venv (.venv has mcp 2).
JS := tests/js
$(JS)/node_modules/.package-lock.json: $(JS)/package.json $(JS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd $(JS) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the TypeScript SDK rows of tests/server/test_compat_matrix.py will be skipped"; fi
# The official MCP Inspector (CLI mode: --app-info) for tests/server/test_history_app_inspector.py, in its own folder;
# its @modelcontextprotocol/ext-apps is the host bridge of tests/server/test_history_app_browser.py.
INSPECTOR := $(JS)/inspector
$(INSPECTOR)/node_modules/.package-lock.json: $(INSPECTOR)/package.json $(INSPECTOR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd $(INSPECTOR) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: tests/server/test_history_app_inspector.py will be skipped"; fi
# A real authorization server (panva's oidc-provider, tests/js/oidc/issuer.mjs) for the OAuth end-to-end tests of
# tests/server/test_oauth_e2e.py and tests/hosted/, in its own folder.
OIDC := $(JS)/oidc
$(OIDC)/node_modules/.package-lock.json: $(OIDC)/package.json $(OIDC)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd $(OIDC) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the OAuth end-to-end tests (tests/server/test_oauth_e2e.py, tests/hosted/) will be skipped"; fi
SDK1 := .venv-sdk1
$(SDK1)/.installed: tests/compat/requirements-sdk1.txt $(STAMP)
	test -x $(SDK1)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(SDK1)
	$(UV) pip install --quiet --python $(SDK1)/bin/python -r tests/compat/requirements-sdk1.txt
	touch $@
CLIENTS := $(SDK1)/.installed $(JS)/node_modules/.package-lock.json $(INSPECTOR)/node_modules/.package-lock.json \
	$(OIDC)/node_modules/.package-lock.json

# The browser tests of `vaultsync ui` (tests/ui/test_ui.py) drive Debian's chromium with Playwright (never its own
# downloaded browsers); the hosted deployment's tests (tests/hosted/) put Debian's nginx (TLS, forwarded headers) in
# front of the HTTP servers. Both are installed here when missing and running as root with apt-get, as on a fresh CI
# machine: in one apt-get call (two at once fight over dpkg's lock), which waits for a lock another apt holds. If the
# install fails, the tests that need them skip and say why.
SYSTEM_PACKAGES = $(if $(shell command -v chromium),,chromium) $(if $(shell command -v nginx || test -x /usr/sbin/nginx && echo y),,nginx-light)
system:
	@if [ -n "$(strip $(SYSTEM_PACKAGES))" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    { apt-get -o DPkg::Lock::Timeout=300 update -qq && DEBIAN_FRONTEND=noninteractive apt-get \
	      -o DPkg::Lock::Timeout=300 install -y -qq $(SYSTEM_PACKAGES) >/dev/null; } \
	    || echo "could not install $(strip $(SYSTEM_PACKAGES)): the tests that need them will be skipped"; \
	  else echo "$(strip $(SYSTEM_PACKAGES)) not found: the browser and reverse-proxy tests will be skipped"; fi; fi
browser proxy: system

# Three pytest-xdist workers, module by module; the corpus modules share one (see tests/conftest.py). Three on
# two cores: much of the suite waits on subprocesses, servers and watchers, so a third worker fills that time.
# PYTEST_WORKERS=0 runs everything in one process.
# The installs (the npm one beside the two venvs) and the browser check run side by side.
PYTEST_WORKERS ?= 3
test: deps
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# ruff (lint and import order, then the formatting check) and mypy over the package (pyproject.toml holds the
# settings). `ruff format .` and `ruff check --fix .` mend most of what it reports.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The fast tier, SQLite only: every test without a tier mark (the corpus replays, PostgreSQL, the browser, the
# other MCP clients, the slow tests; pyproject.toml declares them, each test carries its own: CONTRIBUTING.md).
# `make test` runs everything.
CHECK_MARKERS := not corpus and not pg and not browser and not client and not slow
check: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

deps:
	@$(MAKE) --no-print-directory -j4 -O $(STAMP) $(CLIENTS) system

# Rewrite docs/compatibility.md from a run of every client (`make test` fails when it disagrees with the run).
compat-doc: $(STAMP) $(CLIENTS)
	VAULTSYNC_WRITE_COMPAT=1 $(BIN)/python -m pytest -q tests/server/test_compat_matrix.py

# The test venv has the semantic extra (all-MiniLM-L6-v2 offline, about 210 MB installed), so `make test`
# and CI run tests/embed/test_semantic.py (about 8 CPU-seconds); the default install stays without it, and
# tests/embed/test_semantic.py checks that the core never loads it. `make test-semantic` runs those tests alone.
test-semantic: $(STAMP)
	$(BIN)/python -m pytest -q tests/embed/test_semantic.py $(PYTEST_ARGS)

# The MCP Bundle for Claude Desktop (dist/vaultsync.mcpb: double-click to install; it asks for the vault folder; it
# installs the published vaultsync-mcp at the last tag's version),
# validated and packed by the official CLI (@anthropic-ai/mcpb, pinned in tests/js). tests/cli/test_bundle.py builds
# one, unpacks it and starts it as a host would.
bundle: $(STAMP) $(JS)/node_modules/.package-lock.json
	$(BIN)/python bundle/build.py dist/vaultsync.mcpb

# The documentation site into site/: MkDocs with Material and mkdocstrings, --strict (a broken link, a missing page
# or an unresolved API reference fails). NO_MKDOCS_2_WARNING silences Material's notice about its end of life
# (May 2027) and its successor, which reads the same mkdocs.yml; it is not a build warning.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# Rewrite the generated pages: docs/reference/cli.md (the click commands), docs/reference/mcp-tools.md (tools/list)
# docs/performance.md (benchmarks/results/) and docs/architecture.md's package map (the modules' docstrings).
# tests/test_docs.py and tests/test_docs_architecture.py fail when they drift.
docs-gen: $(STAMP)
	$(BIN)/python scripts/docgen.py

# Benchmarks (benchmarks/, python -m benchmarks list): `make bench` runs every one's --quick form on the sample
# vault (a check that each runs; nothing saved); `make bench NAME=import` runs one in full on the corpora and appends
# its result to benchmarks/results/import.jsonl (`python -m benchmarks report` renders them as markdown).
bench: $(STAMP)
	$(BIN)/python -m benchmarks run $(if $(NAME),$(NAME),--all --quick --no-save)

clean:
	rm -rf $(VENV) $(SDK1) build dist site *.egg-info
