// A kernel timeline for any CUDA program, without Nsight Systems (the GPU machine has none): a CUPTI
// injection library. The driver loads it at cuInit when CUDA_INJECTION64_PATH names it; it records
// every kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: kernels are not serialized, so programmatic
// dependent launch and graph replays keep their overlap) and every memory copy with the GPU's start
// and end timestamps, and writes them at exit to KTRACE_OUT (default ktrace.csv):
//   N,<id>,<kernel name>        once per distinct name
//   K,<start ns>,<end ns>,<stream>,<grid x>,<grid y>,<grid z>,<block x>,<name id>
//   M,<start ns>,<end ns>,<stream>,<bytes>,<copy kind>
// bench/probe/kernel_trace_summary.py cuts the kernels into engine steps and summarizes them.
// Build (on a machine with CUPTI's headers; KREC/MREC: the newest CUpti_ActivityKernel* and
// CUpti_ActivityMemcpy* record types of that header, as bench/run_kernel_trace_h200.sh finds them):
//   g++ -O2 -std=c++17 -shared -fPIC -DKREC=CUpti_ActivityKernel10 -DMREC=CUpti_ActivityMemcpy6
//       -I<cupti include> bench/probe/kernel_trace.cpp -L<cupti lib> -lcupti -o libktrace.so
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct KernelRecord {
  std::uint64_t start, end;
  std::uint32_t stream, grid_x, grid_y, grid_z, block_x, name;
};
struct CopyRecord {
  std::uint64_t start, end, bytes;
  std::uint32_t stream, kind;
};

std::mutex mutex;
std::vector<KernelRecord> kernels;
std::vector<CopyRecord> copies;
std::vector<std::string> names;
std::unordered_map<std::string, std::uint32_t> name_ids;
bool written = false;

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "ktrace: %s failed: %s\n", what, text ? text : "?");
}

// Demangled, without the argument list (templates keep their arguments), commas replaced: one CSV field.
std::string readable(const char* mangled) {
  if (!mangled) return "?";
  std::string name = mangled;
  int status = 1;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status == 0 && plain) {
    name = plain;
    std::free(plain);
    // The argument list is the first '(' outside template arguments that does not open
    // "(anonymous namespace)".
    int depth = 0;
    for (std::size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '<') ++depth;
      if (name[i] == '>') --depth;
      if (name[i] == '(' && depth == 0 && name.compare(i, 21, "(anonymous namespace)") != 0) {
        name.resize(i);
        break;
      }
    }
  }
  for (char& c : name) {
    if (c == ',') c = ';';
  }
  return name;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *size = std::size_t{16} << 20;
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  std::lock_guard<std::mutex> lock(mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const KREC*>(record);
      const std::string name = readable(k->name);
      auto [it, inserted] = name_ids.emplace(name, static_cast<std::uint32_t>(names.size()));
      if (inserted) names.push_back(name);
      kernels.push_back({k->start, k->end, k->streamId, static_cast<std::uint32_t>(k->gridX),
                         static_cast<std::uint32_t>(k->gridY), static_cast<std::uint32_t>(k->gridZ),
                         static_cast<std::uint32_t>(k->blockX), it->second});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* c = reinterpret_cast<const MREC*>(record);
      copies.push_back({c->start, c->end, c->bytes, c->streamId, c->copyKind});
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    std::fprintf(stderr, "ktrace: %zu records dropped\n", dropped);
  }
  std::free(buffer);
}

void write_trace() {
  report(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(mutex);
  if (written) return;
  written = true;
  const char* path = std::getenv("KTRACE_OUT");
  const std::string target = path && *path ? path : "ktrace.csv";
  const std::string temp = target + ".part";
  std::FILE* f = std::fopen(temp.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "ktrace: cannot write %s\n", temp.c_str());
    return;
  }
  for (std::size_t i = 0; i < names.size(); ++i) std::fprintf(f, "N,%zu,%s\n", i, names[i].c_str());
  for (const auto& k : kernels) {
    std::fprintf(f, "K,%llu,%llu,%u,%u,%u,%u,%u,%u\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.stream, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.name);
  }
  for (const auto& c : copies) {
    std::fprintf(f, "M,%llu,%llu,%u,%llu,%u\n", static_cast<unsigned long long>(c.start),
                 static_cast<unsigned long long>(c.end), c.stream, static_cast<unsigned long long>(c.bytes), c.kind);
  }
  const bool ok = std::fclose(f) == 0 && std::rename(temp.c_str(), target.c_str()) == 0;
  std::fprintf(stderr, "ktrace: %zu kernels, %zu copies -> %s%s\n", kernels.size(), copies.size(), target.c_str(),
               ok ? "" : " (write failed)");
}

}  // namespace

extern "C" int InitializeInjection(void) {
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable CONCURRENT_KERNEL");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable MEMCPY");
  std::atexit(write_trace);
  return 1;
}
