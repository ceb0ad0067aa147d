// SPDX-License-Identifier: Apache-2.0
// race_harness.hpp: what the two hardware race programs (lost_wakeup.cpp and
// gate_sb.cpp) share and what is not the protocol: spinning politely, pinning
// a thread to a CPU, choosing two CPUs, and describing the machine in their
// JSON.  The races themselves stay in each program.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/utsname.h>

#include <fstream>
#include <ostream>
#include <string>
#include <thread>

namespace race_harness {

/// A pause inside a spin loop (x86 `pause`, Arm `yield`, else nothing).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/// Pin thread `h` to CPU `cpu`; false if the system refused.
inline bool pin(std::thread::native_handle_type h, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(h, sizeof set, &set) == 0;
}

/// The first two CPUs of this process's affinity mask ({-1, -1} entries
/// where there are fewer).
struct CpuPair {
  int first = -1;
  int second = -1;
};
inline CpuPair two_cpus() {
  CpuPair p;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    int* slots[2] = {&p.first, &p.second};
    for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c) {
      if (CPU_ISSET(c, &mask)) *slots[k++] = c;
    }
  }
  return p;
}

inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

/// Open the JSON object and write the fields that describe the run's
/// machine and build: tool, cpu, cpus_online, machine, kernel, compiler,
/// flags (when the build defines DC_LOST_WAKEUP_FLAGS) and stop_at_first.
inline void write_machine_fields(std::ostream& o, const char* tool, bool stop_at_first) {
  utsname u{};
  uname(&u);
  o << "{\n  \"tool\": \"" << tool << "\",\n";
  o << "  \"cpu\": \"" << json_escape(cpu_model()) << "\",\n";
  o << "  \"cpus_online\": " << std::thread::hardware_concurrency() << ",\n";
  o << "  \"machine\": \"" << json_escape(u.machine) << "\",\n";
  o << "  \"kernel\": \"" << json_escape(std::string(u.sysname) + " " + u.release) << "\",\n";
  o << "  \"compiler\": \"" << json_escape(std::string("g++ ") + __VERSION__) << "\",\n";
#ifdef DC_LOST_WAKEUP_FLAGS
  o << "  \"flags\": \"" << json_escape(DC_LOST_WAKEUP_FLAGS) << "\",\n";
#endif
  o << "  \"stop_at_first\": " << (stop_at_first ? "true" : "false") << ",\n";
}

}  // namespace race_harness
