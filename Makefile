# Thin wrapper over CMake. Each target first installs missing Debian packages (scripts/deps.sh).
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local

.PHONY: all deps configure build demo test gpu-test emu-test bench install clean

all: build

deps:
	@./scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The demo builds only what it runs (the library and ldt), not the tests and benchmarks.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target ldt
	./$(BUILD)/ldt train --mesh dp=2,tp=2 --steps 200 --trace $(BUILD)/demo-trace.json

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The GPU suite (ctest label gpu: CUDA kernels against the CPU ones, capture and replay) and
# the CUDA Graph benchmark. Needs the CUDA toolkit; without a GPU the tests say SKIPPED.
gpu-test:
	@$(MAKE) --no-print-directory build CMAKE_FLAGS="$(CMAKE_FLAGS) -DLDT_CUDA=ON"
	cd $(BUILD) && ctest -L gpu --output-on-failure
	./$(BUILD)/ldt-bench gpu_replay

# The same GPU suite on the CUDA emulator (kernels/cuda/emu), on any machine: the CUDA
# backend and kernels run on the CPU, under AddressSanitizer (what .ci/run does).
emu-test: deps
	@cmake -S . -B build-emu -DLDT_CUDA=EMU -DLDT_MPI=OFF -DLDT_SANITIZE=address+undefined >/dev/null
	@cmake --build build-emu -j $(JOBS)
	cd build-emu && ctest -L gpu --output-on-failure

bench: build
	./$(BUILD)/ldt-bench all

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-emu
