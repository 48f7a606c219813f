# The two entry points of the README. Both install what they need first.
PY := .venv/bin/python
DEMO_BOARD ?= mps2-an505

.PHONY: setup demo test test-fast bench clean

setup:
	@bash scripts/setup

demo: setup
	$(PY) -m mcu.commands.demo --board $(DEMO_BOARD)

# Tests of one example model share a worker (--dist loadgroup, tests/conftest.py) so it compiles once.
test:
	@bash scripts/setup --arm64
	$(PY) -m pytest -n 2 --dist loadgroup -q tests

# Every package's tests without the slow ones (whole models across the board matrix, kernel firmware
# batches on QEMU); `make test` runs everything.
test-fast:
	@bash scripts/setup --arm64
	$(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow" tests

clean:
	rm -rf mcu-out build .pytest_cache
