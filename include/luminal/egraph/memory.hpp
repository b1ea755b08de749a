// Resident memory of the process, for the runner's memory limit and for reports.
#pragma once

#include <cstdio>

#if defined(__linux__) || defined(__APPLE__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace luminal::egraph {

/// Current resident set size in MiB (0 where the platform does not say).
inline double current_rss_mb() noexcept {
#if defined(__linux__)
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
#else
  return 0.0;
#endif
}

/// Peak resident set size of the process so far in MiB (0 where unknown).
inline double peak_rss_mb() noexcept {
#if defined(__linux__)
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
#elif defined(__APPLE__)
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // macOS reports bytes
#else
  return 0.0;
#endif
}

}  // namespace luminal::egraph
