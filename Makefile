# Thin wrapper over CMake: the two commands of the README plus a few conveniences.
#   make run            build, then run both seed workloads on the CPU, checked, and the plan
#   make test           build, then run every test (ctest)
#   make test-sanitize  the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-thread    the multi-threaded op tests built with ThreadSanitizer
#   make bench          time the CPU target shapes (docs/PERF.md), ours vs OpenBLAS side by side,
#                       on 2 threads; the table, then the JSON lines (also in build/bench.jsonl)
BUILD ?= build
SANITIZE_BUILD ?= build-sanitize
THREAD_BUILD ?= build-thread
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest
CLI = $(BUILD)/cvfuse
BENCH_THREADS ?= 2
BENCH_REPEAT ?= 5
MAKEFLAGS += --no-print-directory

.PHONY: all build run test test-sanitize test-thread bench format clean

all: build

$(BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j $(JOBS)

run: build
	$(CLI) matmul-relu --check
	@echo
	$(CLI) mlp-backward --check
	@echo
	$(CLI) explain

test: build
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize:
	$(CMAKE) -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCVF_SANITIZE=ON
	$(CMAKE) --build $(SANITIZE_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(CTEST) --test-dir $(SANITIZE_BUILD) --output-on-failure -j $(JOBS)

test-thread:
	$(CMAKE) -S . -B $(THREAD_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCVF_SANITIZE_THREAD=ON
	$(CMAKE) --build $(THREAD_BUILD) -j $(JOBS) --target test_ops
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir $(THREAD_BUILD) --output-on-failure -R 'test_ops$$|test_ops_small_blocks'

# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set by some login environments) pin OpenBLAS to slower
# kernels: unset for this command only, never for the tests or CI.
bench: build
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(CLI) bench --suite cpu --threads $(BENCH_THREADS) \
		--repeat $(BENCH_REPEAT) --warmup 1 --json-out $(BUILD)/bench.jsonl
	@echo
	@cat $(BUILD)/bench.jsonl

format:
	clang-format -i include/*.h src/*/*.[ch] src/cpu/kernels/*.[ch] tools/*.[ch] tests/*.[ch]

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(THREAD_BUILD)
