# Two commands do all the set-up (see README): `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
# The console's port for `make demo` (make demo PORT=8001 when 8000 is taken).
PORT ?= 8000

.PHONY: setup demo shop test typecheck lint chromium axe promtool pgbouncer postgresql bench docs \
	docs-serve

# Debian packages some tests need; another apt-get holding the dpkg lock is waited for
# (up to 10 minutes), not a failure.
APT = DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600
APT_INSTALL = $(APT) update -qq && $(APT) install -y -qq

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@# setuptools writes jobwarden.egg-info here; one left by an older pyproject.toml
	@# would shadow the installed entry points while the repository is on sys.path
	rm -rf jobwarden.egg-info build
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	@# setuptools' "Please be careful with folders ... with the same name as your package"
	@# is information only: the checkout's jobwarden/ folder is that package
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

# The browser tests drive Debian's chromium (Playwright cannot download browsers here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  $(APT_INSTALL) chromium; }

# The accessibility tests (tests/browser/test_accessibility.py) load axe-core, pinned, from
# .axe/ (npm's registry; Debian's npm when there is none). The stamp names the version, so
# a new pin installs again.
AXE_VERSION = 4.14.1
axe: .axe/axe-core-$(AXE_VERSION).installed

.axe/axe-core-$(AXE_VERSION).installed:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing Debian's npm for axe-core"; \
	  $(APT_INSTALL) npm; }
	rm -rf .axe && mkdir -p .axe
	npm install --prefix .axe --no-audit --no-fund --silent axe-core@$(AXE_VERSION)
	touch $@

# The alerting rules' tests run Debian's promtool (in its `prometheus` package).
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "installing Debian's prometheus (promtool) for the alerting rules' tests"; \
	  $(APT_INSTALL) prometheus; }

# The PgBouncer tests start Debian's pgbouncer on a private port of 127.0.0.1.
pgbouncer:
	@test -x /usr/sbin/pgbouncer || command -v pgbouncer >/dev/null 2>&1 || { \
	  echo "installing Debian's pgbouncer for the connection-pooler tests"; \
	  $(APT_INSTALL) pgbouncer; }

# The plan tests read trigger plans through auto_explain, a contrib module the embedded
# PostgreSQL does not ship: without a server in DATABASE_URL they start a private cluster
# of Debian's PostgreSQL (tests/pgcluster.py), and so do the chaos tests.
postgresql:
	@ls /usr/lib/postgresql/*/lib/auto_explain.so >/dev/null 2>&1 || { \
	  echo "installing Debian's postgresql for the plan and chaos tests"; \
	  $(APT_INSTALL) postgresql; }

# Always the embedded PostgreSQL: the demo adds an admin login with a published password,
# which must never land in whatever database a DATABASE_URL in the shell names.
demo: setup
	env -u DATABASE_URL $(VENV)/bin/jobwarden demo --port $(PORT)

# The example shop (examples/shop/README.md) on the embedded PostgreSQL: make shop PORT=5001.
SHOP_PORT = $(if $(filter command line,$(origin PORT)),$(PORT),5000)
shop: setup
	$(VENV)/bin/pip install --quiet -e '.[examples]'
	cd examples/shop && $(abspath $(VENV))/bin/python -m shop --port $(SHOP_PORT)

# DATABASE_URL selects the PostgreSQL server; without it the tests use the embedded one.
# The type check comes first: a type error fails the run before the tests start.
# TEST_PROCESSES test processes share the files, a whole file each (its module fixtures
# start once); `make test TEST_PROCESSES=0` runs them all in one.
TEST_PROCESSES ?= 2
test: setup typecheck chromium axe promtool pgbouncer postgresql
	$(VENV)/bin/pytest -n $(TEST_PROCESSES) --dist loadfile

# mypy, strict on the runtime and the console (pyproject.toml [tool.mypy]); its cache in
# .mypy_cache makes a run after a small change take seconds.
typecheck: setup
	$(VENV)/bin/mypy

lint: setup
	$(VENV)/bin/ruff check worker console tests bench examples

# The side-by-side benchmark (bench/README.md): `make bench`, or `make bench ARGS=--quick`.
bench: setup
	$(VENV)/bin/pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/python -m bench.peers $(ARGS)

# The documentation site (mkdocs.yml) into ./site. --strict: a broken link, a missing nav
# page or an API reference that no longer resolves fails the build. The generated tables
# (outcomes and states, CLI) are rewritten first, so the site shows what the code says;
# their tests fail when a committed page differs.
docs: $(VENV)/.docs-installed
	$(VENV)/bin/python -m tests.docs_tables
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Serves the site at http://127.0.0.1:8001 (the demo console has 8000), rebuilt on save.
docs-serve: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:$(if $(filter command line,$(origin PORT)),$(PORT),8001)

$(VENV)/.docs-installed: $(VENV)/.installed pyproject.toml
	$(VENV)/bin/pip install --quiet -e '.[test,docs]'
	touch $@
