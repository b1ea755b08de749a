// egraph-workloads: runs one standard e-graph workload and prints key=value lines.
//   egraph-workloads math-micro K          (W1, K iterations; extraction and matches after)
//   egraph-workloads ac-blowup N           (W3, to saturation)
//   egraph-workloads congruence-cascade N  (W4, the one timed rebuild)
//   a third argument "naive" applies every match every iteration (as egg does) instead of
//   skipping matches already applied (semi-naive, the default; same e-graphs either way)
// One line per iteration, then a summary line with at least
// nodes= classes= total_s= search_s= apply_s= rebuild_s= peak_rss_mb=.
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <string>

#include "workloads.hpp"

using namespace egbench;

namespace {

void print_iteration(const IterationStats& s) {
  std::printf(
      "iter=%zu nodes=%zu classes=%zu matches=%zu fresh=%zu applied=%zu rebuild_unions=%zu search_s=%.6f apply_s=%.6f "
      "rebuild_s=%.6f\n",
      s.iteration, s.nodes, s.classes, s.matches, s.fresh, s.applied, s.rebuild_unions, s.search_s, s.apply_s,
      s.rebuild_s);
  std::fflush(stdout);
}

int usage() {
  std::fprintf(
      stderr,
      "usage: egraph-workloads math-micro K | ac-blowup N | congruence-cascade N  [naive]\n"
      "  math-micro K: 1 <= K <= 12; ac-blowup N: 2 <= N <= 14; congruence-cascade N: N >= 2, even\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::string(argv[3]) == "naive")) return usage();
  const bool semi_naive = argc == 3;
  const std::string w = argv[1];
  char* end = nullptr;
  const long n = std::strtol(argv[2], &end, 10);
  if (*end != '\0' || n < 1) return usage();

  if (w == "math-micro") {
    if (n > 12) return usage();
    EGraph<Math> g;
    std::vector<Id> roots;
    std::clock_t c0 = std::clock();
    Report rep = run_math_micro(g, static_cast<std::size_t>(n), roots, print_iteration, semi_naive);
    double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    auto t = Clock::now();
    double cost = extract_ast_size(g, roots);
    double extract_s = since(t);
    t = Clock::now();
    std::size_t matches = count_matches(g);
    double ematch_s = since(t);
    bool ok = static_cast<std::size_t>(n) <= 11 && g.num_nodes() == mathlang::kMathMicroExpect[n - 1].first &&
              g.num_classes() == mathlang::kMathMicroExpect[n - 1].second;
    std::printf(
        "workload=math-micro k=%ld stop=%s nodes=%zu classes=%zu total_s=%.6f search_s=%.6f apply_s=%.6f "
        "rebuild_s=%.6f peak_rss_mb=%.1f extract_cost=%.0f extract_s=%.6f matches=%zu ematch_s=%.6f "
        "cpu_s=%.6f counts_ok=%d\n",
        n, to_string(rep.stop), g.num_nodes(), g.num_classes(), rep.total_s, rep.search_s, rep.apply_s,
        rep.rebuild_s, peak_rss_mb(), cost, extract_s, matches, ematch_s, cpu_s, ok ? 1 : 0);
    return 0;
  }
  if (w == "ac-blowup") {
    if (n < 2 || n > 14) return usage();
    EGraph<Math> g;
    std::clock_t c0 = std::clock();
    Report rep = run_ac_blowup(g, static_cast<int>(n), print_iteration, semi_naive);
    double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    std::size_t p2 = std::size_t{1} << n, p3 = 1;
    for (long i = 0; i < n; ++i) p3 *= 3;
    const std::size_t want_nodes = p3 - 2 * p2 + 1 + static_cast<std::size_t>(n), want_classes = p2 - 1;
    std::printf(
        "workload=ac-blowup n=%ld stop=%s iterations=%zu nodes=%zu classes=%zu total_s=%.6f search_s=%.6f "
        "apply_s=%.6f rebuild_s=%.6f peak_rss_mb=%.1f expected_nodes=%zu expected_classes=%zu cpu_s=%.6f "
        "counts_ok=%d\n",
        n, to_string(rep.stop), rep.iterations.size(), g.num_nodes(), g.num_classes(), rep.total_s,
        rep.search_s, rep.apply_s, rep.rebuild_s, peak_rss_mb(), want_nodes, want_classes, cpu_s,
        g.num_nodes() == want_nodes && g.num_classes() == want_classes ? 1 : 0);
    return 0;
  }
  if (w == "congruence-cascade") {
    if (n < 2 || n % 2 != 0) return usage();
    EGraph<Math> g;
    auto t = Clock::now();
    std::vector<Id> leaves = build_cascade(g, static_cast<std::size_t>(n));
    double build_s = since(t);
    std::printf("phase=build nodes=%zu classes=%zu build_s=%.6f\n", g.num_nodes(), g.num_classes(), build_s);
    unite_pairs(g, leaves);
    t = Clock::now();
    std::clock_t c0 = std::clock();
    std::size_t merges = g.rebuild();
    double rebuild_s = since(t);
    double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    const bool ok = merges == 10 * static_cast<std::size_t>(n) &&
                    g.num_nodes() == 11 * static_cast<std::size_t>(n) &&
                    g.num_classes() == 21 * static_cast<std::size_t>(n) / 2;
    std::printf(
        "workload=congruence-cascade n=%ld nodes=%zu classes=%zu merges=%zu total_s=%.6f search_s=0 "
        "apply_s=0 "
        "rebuild_s=%.6f build_s=%.6f peak_rss_mb=%.1f cpu_s=%.6f counts_ok=%d\n",
        n, g.num_nodes(), g.num_classes(), merges, rebuild_s, rebuild_s, build_s, peak_rss_mb(), cpu_s,
        ok ? 1 : 0);
    return 0;
  }
  return usage();
}
