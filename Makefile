# The two entry points of the README. Both install what they need first.
PY := .venv/bin/python
DEMO_BOARD ?= mps2-an505

.PHONY: setup demo test bench clean

setup:
	@bash scripts/setup

demo: setup
	$(PY) -m mcu.commands.demo --board $(DEMO_BOARD)

test:
	@bash scripts/setup --arm64
	$(PY) -m pytest -n 2 -q tests

clean:
	rm -rf mcu-out build .pytest_cache
