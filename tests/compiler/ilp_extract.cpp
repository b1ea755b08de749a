#include "ilp_extract.hpp"

#include <glpk.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace luminal::test {

using egraph::Id;

namespace {

// Strongly connected components (Tarjan, iterative) of the class graph `adj`.
std::vector<int> components(const std::vector<std::vector<int>>& adj) {
  const int n = static_cast<int>(adj.size());
  std::vector<int> index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0), comp(static_cast<size_t>(n), -1);
  std::vector<int> st;
  std::vector<uint8_t> on(static_cast<size_t>(n), 0);
  int next = 0, ncomp = 0;
  std::vector<std::pair<int, size_t>> work;
  for (int s = 0; s < n; ++s) {
    if (index[static_cast<size_t>(s)] >= 0) continue;
    work.push_back({s, 0});
    while (!work.empty()) {
      auto& [v, i] = work.back();
      const auto uv = static_cast<size_t>(v);
      if (i == 0 && index[uv] < 0) {
        index[uv] = low[uv] = next++;
        st.push_back(v);
        on[uv] = 1;
      }
      if (i < adj[uv].size()) {
        const int w = adj[uv][i++];
        const auto uw = static_cast<size_t>(w);
        if (index[uw] < 0) {
          work.push_back({w, 0});
        } else if (on[uw]) {
          low[uv] = std::min(low[uv], index[uw]);
        }
        continue;
      }
      if (low[uv] == index[uv]) {
        for (;;) {
          const int w = st.back();
          st.pop_back();
          on[static_cast<size_t>(w)] = 0;
          comp[static_cast<size_t>(w)] = ncomp;
          if (w == v) break;
        }
        ++ncomp;
      }
      const int done = v;
      work.pop_back();
      if (!work.empty()) {
        const auto up = static_cast<size_t>(work.back().first);
        low[up] = std::min(low[up], low[static_cast<size_t>(done)]);
      }
    }
  }
  return comp;
}

struct Warm {
  std::vector<double> x;  // column values, 1-based
};

void give_incumbent(glp_tree* tree, void* info) {
  if (glp_ios_reason(tree) != GLP_IHEUR) return;
  auto* w = static_cast<Warm*>(info);
  if (w->x.empty()) return;
  glp_ios_heur_sol(tree, w->x.data());
  w->x.clear();  // once
}

struct CbcSolution {
  bool optimal = false;
  double objective = 0;
  std::vector<double> value;  // per column, 1-based
};

// Writes the model as CPLEX LP, runs `cbc` with the time limit, reads its solution.
// nullopt when cbc is not installed or gives no integer solution.
std::optional<CbcSolution> solve_with_cbc(glp_prob* lp, double time_limit_s, const Warm& warm) {
  char dir_tmpl[] = "/tmp/luminal-ilp-XXXXXX";
  const char* dir = mkdtemp(dir_tmpl);
  if (!dir) return std::nullopt;
  const std::string base = std::string(dir) + "/model", lp_path = base + ".lp", sol_path = base + ".sol",
                    start_path = base + ".start";
  std::optional<CbcSolution> out;
  if (glp_write_lp(lp, nullptr, lp_path.c_str()) == 0) {
    // The starting solution as a MIP start (the solution file's format).
    std::string start_arg;
    if (!warm.x.empty()) {
      std::ofstream st(start_path);
      st << "Feasible - objective value 0\n";
      for (size_t c = 1; c < warm.x.size(); ++c)
        if (warm.x[c] != 0) st << "      " << c - 1 << " c" << c << " " << warm.x[c] << " 0\n";
      start_arg = " mips " + start_path;
    }
    const std::string cmd = "cbc " + lp_path + start_arg + " sec " + std::to_string(static_cast<int>(time_limit_s)) +
                            " solve solu " + sol_path + " > " + base + ".log 2>&1";
    if (std::system(cmd.c_str()) == 0) {
      std::ifstream f(sol_path);
      std::string status;
      if (std::getline(f, status) && status.find("objective value") != std::string::npos &&
          status.find("Infeasible") == std::string::npos) {
        CbcSolution sol;
        sol.optimal = status.rfind("Optimal", 0) == 0;
        char* end = nullptr;
        const std::string num = status.substr(status.rfind("objective value") + 15);
        sol.objective = std::strtod(num.c_str(), &end);
        sol.value.assign(static_cast<size_t>(glp_get_num_cols(lp)) + 1, 0.0);
        int idx;
        std::string name;
        double v;
        bool ok = end != num.c_str();
        while (ok && f >> idx >> name >> v) {
          std::string rest;
          std::getline(f, rest);
          const long col = name.size() > 1 && name[0] == 'c' ? std::strtol(name.c_str() + 1, nullptr, 10) : 0;
          if (col >= 1 && static_cast<size_t>(col) < sol.value.size()) sol.value[static_cast<size_t>(col)] = v;
        }
        if (ok) out = std::move(sol);
      }
    }
  }
  std::filesystem::remove_all(dir);
  return out;
}

}  // namespace

IlpResult ilp_extract(ir::EGraph& g, const compiler::KernelCost& cost, const std::vector<Id>& roots,
                      double time_limit_s, const std::vector<Id>& start) {
  const auto t0 = std::chrono::steady_clock::now();
  IlpResult res;
  const auto& ix = g.index();
  // Classes reachable from the roots through finite-cost nodes; per class its candidate
  // nodes (the cheapest of each distinct child set).
  std::unordered_map<Id, int> cls_index;
  std::vector<Id> classes;
  std::vector<std::vector<Id>> cand;
  std::vector<Id> stack;
  for (Id r : roots) stack.push_back(g.find(r));
  while (!stack.empty()) {
    const Id c = stack.back();
    stack.pop_back();
    if (cls_index.count(c)) continue;
    cls_index[c] = static_cast<int>(classes.size());
    classes.push_back(c);
    std::map<std::vector<Id>, Id> by_kids;
    for (Id nd : ix.nodes(c)) {
      const double w = cost(g.node(nd));
      if (!std::isfinite(w)) continue;
      std::vector<Id> kids;
      for (Id k : g.node(nd).kids) kids.push_back(g.find(k));
      std::sort(kids.begin(), kids.end());
      kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
      if (std::find(kids.begin(), kids.end(), c) != kids.end()) continue;  // reads itself
      auto it = by_kids.find(kids);
      if (it == by_kids.end() || w < cost(g.node(it->second))) by_kids[kids] = nd;
    }
    cand.emplace_back();
    for (const auto& [kids, nd] : by_kids) {
      cand.back().push_back(nd);
      for (Id k : kids) stack.push_back(k);
    }
  }
  const int nc = static_cast<int>(classes.size());
  glp_prob* lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  // Columns: a_c (1..nc), t_c (nc+1..2nc), then x_n.
  glp_add_cols(lp, 2 * nc);
  for (int i = 0; i < nc; ++i) {
    glp_set_col_kind(lp, 1 + i, GLP_BV);
    glp_set_col_bnds(lp, nc + 1 + i, GLP_DB, 0.0, static_cast<double>(nc - 1));
  }
  for (Id r : roots) {
    const int i = cls_index.at(g.find(r));
    glp_set_col_bnds(lp, 1 + i, GLP_FX, 1.0, 1.0);
  }
  std::vector<std::pair<int, Id>> xcol;  // (class index, node) per x column
  for (int i = 0; i < nc; ++i)
    for (Id nd : cand[static_cast<size_t>(i)]) xcol.emplace_back(i, nd);
  const int first_x = 2 * nc + 1;
  glp_add_cols(lp, static_cast<int>(xcol.size()));
  for (size_t j = 0; j < xcol.size(); ++j) {
    glp_set_col_kind(lp, first_x + static_cast<int>(j), GLP_BV);
    // In microseconds: GLPK's tolerances are absolute (1e-7), kernel costs ~1e-6 s.
    glp_set_obj_coef(lp, first_x + static_cast<int>(j), 1e6 * cost(g.node(xcol[j].second)));
  }
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0};
  int row = 0;
  auto add_row = [&](int type, double lo, double hi, const std::vector<std::pair<int, double>>& terms) {
    glp_add_rows(lp, 1);
    ++row;
    glp_set_row_bnds(lp, row, type, lo, hi);
    for (const auto& [col, v] : terms) {
      ia.push_back(row);
      ja.push_back(col);
      ar.push_back(v);
    }
  };
  // sum x_n - a_c = 0
  {
    std::vector<std::vector<std::pair<int, double>>> terms(static_cast<size_t>(nc));
    for (int i = 0; i < nc; ++i) terms[static_cast<size_t>(i)].push_back({1 + i, -1.0});
    for (size_t j = 0; j < xcol.size(); ++j)
      terms[static_cast<size_t>(xcol[j].first)].push_back({first_x + static_cast<int>(j), 1.0});
    for (const auto& t : terms) add_row(GLP_FX, 0.0, 0.0, t);
  }
  const double M = static_cast<double>(nc);
  std::vector<std::vector<int>> adj(static_cast<size_t>(nc));
  for (size_t j = 0; j < xcol.size(); ++j)
    for (Id k : g.node(xcol[j].second).kids) adj[static_cast<size_t>(xcol[j].first)].push_back(cls_index.at(g.find(k)));
  const std::vector<int> comp = components(adj);
  for (size_t j = 0; j < xcol.size(); ++j) {
    const int x = first_x + static_cast<int>(j), ci = xcol[j].first;
    std::vector<Id> kids;
    for (Id k : g.node(xcol[j].second).kids) kids.push_back(g.find(k));
    std::sort(kids.begin(), kids.end());
    kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
    for (Id k : kids) {
      const int ki = cls_index.at(k);
      add_row(GLP_UP, 0.0, 0.0, {{x, 1.0}, {1 + ki, -1.0}});  // x_n <= a_k
      // t_c - t_k - M x_n >= 1 - M, where a cycle through this edge is possible
      if (comp[static_cast<size_t>(ci)] == comp[static_cast<size_t>(ki)])
        add_row(GLP_LO, 1.0 - M, 0.0, {{nc + 1 + ci, 1.0}, {nc + 1 + ki, -1.0}, {x, -M}});
    }
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  for (int c = 1; c <= glp_get_num_cols(lp); ++c) glp_set_col_name(lp, c, ("c" + std::to_string(c)).c_str());
  res.columns = glp_get_num_cols(lp);
  res.rows = glp_get_num_rows(lp);
  // The starting solution as column values: its nodes (mapped to the kept node with the
  // same children), their classes active, t = height in its DAG.
  Warm warm;
  if (!start.empty()) {
    warm.x.assign(static_cast<size_t>(res.columns) + 1, 0.0);
    std::vector<int> height(static_cast<size_t>(nc), -1);
    std::function<int(int)> visit = [&](int ci) -> int {
      auto& h = height[static_cast<size_t>(ci)];
      if (h >= 0) return h;
      h = 0;
      const Id c = classes[static_cast<size_t>(ci)];
      const Id nd = start.at(c);
      std::vector<Id> kids;
      for (Id k : g.node(nd).kids) kids.push_back(g.find(k));
      std::sort(kids.begin(), kids.end());
      kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
      int mine = 0;
      for (Id k : kids) mine = std::max(mine, visit(cls_index.at(k)) + 1);
      for (size_t j = 0; j < xcol.size(); ++j) {
        if (xcol[j].first != ci) continue;
        std::vector<Id> kk;
        for (Id k : g.node(xcol[j].second).kids) kk.push_back(g.find(k));
        std::sort(kk.begin(), kk.end());
        kk.erase(std::unique(kk.begin(), kk.end()), kk.end());
        if (kk == kids) warm.x[static_cast<size_t>(first_x) + j] = 1.0;
      }
      warm.x[static_cast<size_t>(1 + ci)] = 1.0;
      warm.x[static_cast<size_t>(nc + 1 + ci)] = mine;
      return height[static_cast<size_t>(ci)] = mine;
    };
    for (Id r : roots) visit(cls_index.at(g.find(r)));
  }
  // COIN-OR CBC (the `cbc` program, Debian coinor-cbc) solves these in seconds where
  // GLPK's branch and bound runs out of time; GLPK builds the model and is the fallback.
  if (auto sol = solve_with_cbc(lp, time_limit_s, warm)) {
    res.solved = true;
    res.optimal = sol->optimal;
    res.cost = sol->objective * 1e-6;
    res.choice.assign(g.num_node_ids(), egraph::kNoId);
    for (size_t j = 0; j < xcol.size(); ++j)
      if (sol->value[static_cast<size_t>(first_x) + j] > 0.5)
        res.choice[classes[static_cast<size_t>(xcol[j].first)]] = xcol[j].second;
    res.solver = "cbc";
    glp_delete_prob(lp);
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  }
  res.solver = "glpk";
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.tm_lim = static_cast<int>(time_limit_s * 1000);
  parm.cb_func = give_incumbent;
  parm.cb_info = &warm;
  const int rc = glp_intopt(lp, &parm);
  const int status = glp_mip_status(lp);
  res.solved = (rc == 0 || rc == GLP_ETMLIM) && (status == GLP_OPT || status == GLP_FEAS);
  res.optimal = rc == 0 && status == GLP_OPT;
  if (res.solved) {
    res.cost = glp_mip_obj_val(lp) * 1e-6;
    res.choice.assign(g.num_node_ids(), egraph::kNoId);
    for (size_t j = 0; j < xcol.size(); ++j)
      if (glp_mip_col_val(lp, first_x + static_cast<int>(j)) > 0.5)
        res.choice[classes[static_cast<size_t>(xcol[j].first)]] = xcol[j].second;
  }
  glp_delete_prob(lp);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace luminal::test
