# Shortcuts for the scripts; each script also runs on its own.
.PHONY: demo test lint
demo:
	scripts/demo.sh
test:
	scripts/test.sh
lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
