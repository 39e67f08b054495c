// kc-trace: a timeline of every kernel a program runs, for a machine without Nsight Systems.
//
// Why: a decode step is a chain of short kernels launched as a CUDA graph, each a programmatic
// dependent of the one before (its blocks start while that kernel drains). Nsight Compute runs
// each kernel alone, so it can say how long a kernel takes by itself but not how the chain
// overlaps, and the step's time is not the sum of its kernels'. This library records, from the
// GPU's own timestamps, when each kernel (and memcpy, memset) started and ended as the program
// ran, graph replays included, through CUPTI's activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
// which leaves kernels free to overlap).
//
// How: it is a CUDA injection library. The driver loads the library named by
// CUDA_INJECTION64_PATH when the program initializes CUDA and calls InitializeInjection(), which
// turns the activity records on; at exit the records are flushed to a CSV file. Nothing in the
// program changes.
//
//   KC_TRACE_OUT=trace.csv CUDA_INJECTION64_PATH=build/bench/libkc_trace.so
//     build/stage4-inference/kc-engine-bench --synthetic llama-3.2-1b ...   (one command line)
//   python3 scripts/trace_summary.py trace.csv
//
// Environment: KC_TRACE_OUT (the CSV; default kc-trace.csv), KC_TRACE_COPIES=1 (also memcpys and
// memsets), KC_TRACE_API=1 (also the CUDA runtime API calls, with their host-side start and end,
// on the same clock). The columns are in kTraceHeader below; times are nanoseconds on CUPTI's
// clock, comparable within one file.
//
// Cost: CUPTI stamps each kernel's start and end; scripts/trace_summary.py reports the traced
// run's step times so they can be compared with an untraced run of the same command.
#include <cupti.h>
#include <cxxabi.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr const char* kTraceHeader =
    "kind,name,start_ns,end_ns,stream,correlation,graph,graph_node,grid_x,grid_y,grid_z,block_x,block_y,block_z,"
    "registers,static_smem,dynamic_smem,bytes\n";
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

std::mutex file_mutex;
std::FILE* trace_file = nullptr;
std::string trace_path;
bool failed = false;

// CUPTI refused: say so, and leave no file that looks like an empty trace.
void fail(const char* what, CUptiResult result) {
  const char* text = "unknown";
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kc-trace: %s failed: %s; no trace is written\n", what, text);
  failed = true;
  std::fclose(trace_file);
  trace_file = nullptr;
  std::remove(trace_path.c_str());
}

// The kernel's name as C++ wrote it (CUPTI hands out the mangled one). Commas and quotes stay;
// the field is quoted as CSV asks.
std::string readable_name(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  std::string quoted = "\"";
  for (const char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

void write_kernel(const CUpti_ActivityKernel10& k) {
  std::fprintf(trace_file, "kernel,%s,%llu,%llu,%u,%u,%u,%llu,%d,%d,%d,%d,%d,%d,%u,%d,%d,0\n",
               readable_name(k.name).c_str(), static_cast<unsigned long long>(k.start),
               static_cast<unsigned long long>(k.end), k.streamId, k.correlationId, k.graphId,
               static_cast<unsigned long long>(k.graphNodeId), k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY,
               k.blockZ, static_cast<unsigned>(k.registersPerThread), k.staticSharedMemory, k.dynamicSharedMemory);
}

// A memcpy or memset record (its kind is also its name).
template <class Copy>
void write_copy(const char* kind, const Copy& m) {
  std::fprintf(trace_file, "%s,%s,%llu,%llu,%u,%u,%u,%llu,0,0,0,0,0,0,0,0,0,%llu\n", kind, kind,
               static_cast<unsigned long long>(m.start), static_cast<unsigned long long>(m.end), m.streamId,
               m.correlationId, m.graphId, static_cast<unsigned long long>(m.graphNodeId),
               static_cast<unsigned long long>(m.bytes));
}

void write_api(const CUpti_ActivityAPI& a) {
  const char* name = "?";
  cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a.cbid, &name);
  std::fprintf(trace_file, "runtime_api,%s,%llu,%llu,0,%u,0,0,0,0,0,0,0,0,0,0,0,0\n", name,
               static_cast<unsigned long long>(a.start), static_cast<unsigned long long>(a.end), a.correlationId);
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  // CUPTI asks for 8-byte alignment; aligned_alloc's size must be a multiple of the alignment.
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  {
    std::lock_guard<std::mutex> lock(file_mutex);
    CUpti_Activity* record = nullptr;
    while (trace_file != nullptr && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
          write_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
          break;
        case CUPTI_ACTIVITY_KIND_MEMCPY:
          write_copy("memcpy", *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
          break;
        case CUPTI_ACTIVITY_KIND_MEMSET:
          write_copy("memset", *reinterpret_cast<const CUpti_ActivityMemset4*>(record));
          break;
        case CUPTI_ACTIVITY_KIND_RUNTIME:
          write_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record));
          break;
        default:
          break;
      }
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped != 0)
    std::fprintf(stderr, "kc-trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

bool env_is_one(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

void flush_at_exit() {
  if (failed) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(file_mutex);
  if (trace_file != nullptr) {
    std::fclose(trace_file);
    trace_file = nullptr;
  }
}

}  // namespace

extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("KC_TRACE_OUT");
  if (path == nullptr || *path == '\0') path = "kc-trace.csv";
  trace_path = path;
  trace_file = std::fopen(path, "w");
  if (trace_file == nullptr) {
    std::fprintf(stderr, "kc-trace: cannot write '%s': %s; no trace is written\n", path, std::strerror(errno));
    return 0;
  }
  std::fputs(kTraceHeader, trace_file);
  CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (result != CUPTI_SUCCESS) {
    fail("cuptiActivityRegisterCallbacks", result);
    return 0;
  }
  const bool api = env_is_one("KC_TRACE_API"), copies = env_is_one("KC_TRACE_COPIES");
  std::vector<CUpti_ActivityKind> kinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  if (copies) kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  if (api) kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  for (const CUpti_ActivityKind kind : kinds) {
    result = cuptiActivityEnable(kind);
    if (result != CUPTI_SUCCESS) {
      fail("cuptiActivityEnable", result);
      return 0;
    }
  }
  std::atexit(flush_at_exit);
  std::fprintf(stderr, "kc-trace: recording kernels%s%s into %s\n", copies ? ", copies" : "",
               api ? ", runtime API calls" : "", path);
  return 1;
}
