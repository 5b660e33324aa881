# Thin wrapper over CMake: the two commands of the README plus a few conveniences.
#   make run            build, then run both seed workloads on the CPU, checked, and the plan
#   make test           build, then run every test (ctest)
#   make test-sanitize  the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-thread    the multi-threaded op tests built with ThreadSanitizer
#   make test-clang     the suite built with clang (in build-clang)
#   make bench          time the CPU target shapes (docs/PERF.md), ours vs OpenBLAS side by side,
#                       on 2 threads; the table, then the JSON lines (also in build/bench.jsonl)
# CMAKE_FLAGS is added to every configure, e.g. `make test CMAKE_FLAGS=-DCVF_WERROR=ON` (what CI does;
# it takes effect when a build directory is first configured).
#   make fuzz-smoke     build the libFuzzer targets (clang, tests/fuzz) and run each for a minute
#   make fuzz           the same, FUZZ_TIME seconds each (default 600)
BUILD ?= build
SANITIZE_BUILD ?= build-sanitize
THREAD_BUILD ?= build-thread
CLANG_BUILD ?= build-clang
CLANG ?= clang
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest
CLI = $(BUILD)/cvfuse
BENCH_THREADS ?= 2
BENCH_REPEAT ?= 5
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_TIME ?= 600
FUZZ_SMOKE_TIME ?= 60
MAKEFLAGS += --no-print-directory

.PHONY: all build run test test-sanitize test-thread test-clang bench format clean fuzz-build fuzz-smoke fuzz

all: build

$(BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

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
	$(CMAKE) -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCVF_SANITIZE=ON $(CMAKE_FLAGS)
	$(CMAKE) --build $(SANITIZE_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(CTEST) --test-dir $(SANITIZE_BUILD) --output-on-failure -j $(JOBS)

test-thread:
	$(CMAKE) -S . -B $(THREAD_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCVF_SANITIZE_THREAD=ON $(CMAKE_FLAGS)
	$(CMAKE) --build $(THREAD_BUILD) -j $(JOBS) --target test_ops test_threadpool
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir $(THREAD_BUILD) --output-on-failure -R 'test_ops$$|test_ops_small_blocks|test_threadpool'

# The whole suite built with clang (the CUDA backend, when nvcc is found, keeps nvcc's host compiler).
test-clang:
	$(CMAKE) -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=$(CLANG) $(CMAKE_FLAGS)
	$(CMAKE) --build $(CLANG_BUILD) -j $(JOBS)
	$(CTEST) --test-dir $(CLANG_BUILD) --output-on-failure -j $(JOBS)

# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set by some login environments) pin OpenBLAS to slower
# kernels: unset for this command only, never for the tests or CI.
bench: build
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(CLI) bench --suite cpu --threads $(BENCH_THREADS) \
		--repeat $(BENCH_REPEAT) --warmup 1 --json-out $(BUILD)/bench.jsonl
	@echo
	@cat $(BUILD)/bench.jsonl

# The fuzzers (tests/fuzz, README "Fuzzing"): their own clang build, only the two fuzz targets.
$(FUZZ_BUILD)/CMakeCache.txt:
	CC=$(FUZZ_CC) $(CMAKE) -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCVF_BUILD_FUZZERS=ON \
		-DCVF_CUDA=OFF -DCVF_BUILD_TESTS=OFF -DCVF_BENCH_OPENBLAS=OFF

fuzz-build: $(FUZZ_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_npy fuzz_api

fuzz-smoke: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_TIME)

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TIME)

format:
	clang-format -i include/*.h src/*/*.[ch] src/cpu/kernels/*.[ch] tools/*.[ch] tests/*.[ch] tests/fuzz/*.[ch]

clean:
.PHONY: all build run test test-sanitize test-thread test-clang bench format clean fuzz-build fuzz-smoke fuzz
