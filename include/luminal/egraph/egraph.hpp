// The e-graph: union-find over e-classes, a hashcons of canonical e-nodes, deferred
// rebuilding and an e-class analysis.
//
// Layout (why it is fast): every array is flat and indexed by a 32-bit id. A node is one
// record (op, payload, offset of its children in one shared `kids_` array, cached hash).
// Creating a node creates its singleton class with the same id, so node ids and class ids
// share one numbering, and the class of node n is simply find(n). The hashcons slots keep
// a copy of small nodes' keys, so a lookup rarely touches the node records. Each child slot of
// each node is also a "parent edge" of the child's class: the parents of a class form a
// singly-linked list threaded through the slots (with a tail), so adding a parent touches
// only the child's class record, merging two parent lists is an O(1) splice, and adding a
// node allocates nothing but array growth.
//
// Invariants after rebuild(): every live node's children are canonical (union-find
// roots); the hashcons holds exactly the live nodes, so no two live nodes are equal; every
// class's analysis data is the join of `make` over its nodes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "luminal/egraph/analysis.hpp"
#include "luminal/egraph/hashcons.hpp"
#include "luminal/egraph/language.hpp"
#include "luminal/egraph/limits.hpp"
#include "luminal/egraph/pod_vector.hpp"
#include "luminal/error.hpp"

namespace luminal::egraph {

/// A read-only snapshot of the canonical e-graph, built after a rebuild: the live nodes of
/// every class sorted by op, and for every op the classes that hold it. Each node's op,
/// payload and children are copied beside it ("entries"), so e-matching scans contiguous
/// memory. E-matching and extraction read it; it is invalidated by the next change to the
/// e-graph.
template <Language L>
class ClassIndex {
 public:
  using Op = typename L::Op;
  using Payload = typename L::Payload;

  /// Canonical class ids, ascending.
  std::span<const Id> classes() const noexcept { return {classes_.data(), classes_.size()}; }
  /// Node ids of class `cls` (canonical), sorted by op.
  std::span<const Id> nodes(Id cls) const noexcept {
    return {nodes_.data() + off_[cls], nodes_.data() + off_[cls + 1]};
  }
  /// Node ids of class `cls` with op `op`.
  std::span<const Id> nodes(Id cls, Op op) const noexcept {
    auto [b, e] = entries(cls, op);
    return {nodes_.data() + b, nodes_.data() + e};
  }
  /// Entry range [first, last) of the nodes of class `cls` with op `op`.
  std::pair<std::uint32_t, std::uint32_t> entries(Id cls, Op op) const noexcept {
    std::uint32_t b = off_[cls], e = off_[cls + 1];
    while (b < e && ops_[b] != op) ++b;
    std::uint32_t m = b;
    while (m < e && ops_[m] == op) ++m;
    return {b, m};
  }
  /// Node id of entry j.
  Id entry_node(std::uint32_t j) const noexcept { return nodes_[j]; }
  /// Children of entry j (canonical class ids).
  std::span<const Id> entry_kids(std::uint32_t j) const noexcept {
    return {ekids_.data() + ekid_off_[j], ekids_.data() + ekid_off_[j + 1]};
  }
  /// Payload of entry j.
  const Payload& entry_payload(std::uint32_t j) const noexcept {
    if constexpr (std::is_empty_v<Payload>) {
      return empty_payload_;
    } else {
      return epay_[j];
    }
  }
  /// Canonical classes holding at least one node with op `op`, ascending.
  std::span<const Id> classes_with(Op op) const noexcept {
    std::size_t i = op_index<L>(op);
    return {op_classes_.data() + op_off_[i], op_classes_.data() + op_off_[i + 1]};
  }
  /// Every live node id, grouped by class.
  std::span<const Id> all_nodes() const noexcept { return {nodes_.data(), nodes_.size()}; }
  /// Epoch (EGraph::next_epoch) in which entry j's node was created, had its children
  /// re-canonicalized or joined another class, whichever is latest.
  std::uint32_t entry_stamp(std::uint32_t j) const noexcept { return estamp_[j]; }

 private:
  template <Language, class>
  friend class EGraph;
  PodVector<std::uint32_t> off_;       // per class id: start of its entries
  PodVector<Id> nodes_;                // per entry: node id
  FlatVector<Op> ops_;                 // per entry: op
  FlatVector<Payload> epay_;           // per entry: payload (empty for payload-free languages)
  PodVector<std::uint32_t> ekid_off_;  // per entry (+1): start of its children in ekids_
  PodVector<Id> ekids_;
  PodVector<std::uint32_t> estamp_;  // per entry: its node's stamp
  PodVector<Id> classes_;
  PodVector<std::uint32_t> op_off_;
  PodVector<Id> op_classes_;
  static inline const Payload empty_payload_{};
};

/// An e-graph over language `L` with e-class analysis `A`.
///
/// Typical use: `add` terms, `merge` classes, `rebuild` once to restore congruence, then
/// read `index()` / `data()`. Between rebuilds `add` and `merge` are valid and cheap, but
/// equal nodes may be duplicated until the next rebuild. Not thread-safe (even `find`
/// compresses paths).
template <Language L, class A = NoAnalysis>
class EGraph {
 public:
  using Lang = L;
  using Analysis = A;
  using Op = typename L::Op;
  using Payload = typename L::Payload;
  using Data = typename A::Data;

  /// An empty e-graph; `analysis` is kept and called for every node and merge.
  explicit EGraph(A analysis = A{}) : analysis_(std::move(analysis)) {}

  // ------------------------------------------------------------------ building

  /// Adds the node (op, payload, kids) unless an equal node exists; returns its class
  /// (canonical). Children are canonicalized first.
  Id add(Op op, const Payload& payload, std::span<const Id> kids) {
    if (kids.size() > kInlineKids) [[unlikely]] {
      std::vector<Id> canon(kids.begin(), kids.end());
      for (Id& k : canon) k = find(k);
      return add_found(op, payload, canon);
    }
    Id canon[kInlineKids];
    for (std::size_t i = 0; i < kids.size(); ++i) canon[i] = find(kids[i]);
    return add_found(op, payload, std::span<const Id>(canon, kids.size()));
  }
  /// `add` with a default payload.
  Id add(Op op, std::initializer_list<Id> kids = {}) {
    return add(op, Payload{}, std::span<const Id>(kids.begin(), kids.size()));
  }
  /// `add` with a payload and a brace list of children.
  Id add(Op op, const Payload& payload, std::initializer_list<Id> kids) {
    return add(op, payload, std::span<const Id>(kids.begin(), kids.size()));
  }

 private:
  // add() once the children are canonical: the lookup is inlined into callers (it is
  // the hot path of applying rules); creating a node is not.
  [[gnu::always_inline]] inline Id add_found(Op op, const Payload& payload, std::span<const Id> ck) {
    std::uint32_t h = hash_node<L>(op, payload, ck);
    if (Id m = memo_.find(h, [&](const Slot& sl) { return same(sl, op, payload, ck); }); m != kNoId)
      return find(m);
    return add_new(op, payload, ck, h);
  }
  [[gnu::noinline]] Id add_new(Op op, const Payload& payload, std::span<const Id> ck, std::uint32_t h) {
    if (limits_) [[unlikely]] {
      if (num_live_ >= limits_->node_limit) throw BudgetExceeded{StopReason::NodeLimit};
      poll_limits();
    }
    Id n = push_node(op, payload, ck, h);
    memo_.insert_new(h, n, make_key(op, payload, ck));
    if constexpr (!kEmptyData) data_.back() = analysis_.make(*this, node(n));
    ++version_;
    if constexpr (requires(A & a) { a.modify(*this, n); }) analysis_.modify(*this, n);
    return n;
  }

 public:
  /// Hints the cache with the hashcons slot that `add(op, payload, kids)` will probe
  /// (kids taken as they are); lets callers overlap the memory latency of many adds.
  void prefetch_add(Op op, const Payload& payload, std::span<const Id> kids) const noexcept {
    memo_.prefetch(hash_node<L>(op, payload, kids));
    for (Id k : kids) __builtin_prefetch(uf_.data() + k);
  }

  /// The class of the node equal to (op, payload, kids) after canonicalizing kids, or kNoId.
  Id lookup(Op op, const Payload& payload, std::span<const Id> kids) const {
    std::vector<Id> canon(kids.begin(), kids.end());
    for (Id& k : canon) k = find(k);
    std::span<const Id> ck(canon);
    Id m =
        memo_.find(hash_node<L>(op, payload, ck), [&](const Slot& sl) { return same(sl, op, payload, ck); });
    return m == kNoId ? kNoId : find(m);
  }

  /// Arms `limits` (nullptr disarms): from then on `add` refuses to create a node once
  /// `node_limit` nodes are live, and `add`, `merge` and `poll_limits` read the clock (and
  /// the resident set, when limited) every `check_every` calls; a limit passed throws
  /// BudgetExceeded before anything changes. `rebuild` is never limited (it only shrinks
  /// the graph and must restore the invariants). `limits` must outlive the arming.
  void arm_limits(const Limits* limits) noexcept {
    limits_ = limits;
    ticks_ = 0;
  }
  /// The armed limits, or nullptr.
  const Limits* armed_limits() const noexcept { return limits_; }
  /// One unit of work under the armed limits (no-op when none are armed): callers whose
  /// loops neither add nor merge (applying matches that change nothing) call it per step.
  void poll_limits() {
    if (!limits_ || ++ticks_ < limits_->check_every) return;
    ticks_ = 0;
    StopReason why;
    if (limits_->passed(why)) throw BudgetExceeded{why};
  }

  /// Canonical id of class `id` (path halving).
  Id find(Id id) const noexcept {
    while (uf_[id] != id) {
      Id p = uf_[id];
      Id g = uf_[p];
      uf_[id] = g;
      id = g;
    }
    return id;
  }

  /// Unions two classes; returns false when they were already equal. Congruence is
  /// restored by the next `rebuild`.
  bool merge(Id a, Id b) {
    a = find(a);
    b = find(b);
    if (a == b) return false;
    if (limits_) [[unlikely]] poll_limits();
    if (cls_[a].pcount < cls_[b].pcount) std::swap(a, b);  // keep the class with more parents
    uf_[b] = a;
    --num_classes_;
    ++version_;
    DidMerge dm;
    if constexpr (!kEmptyData) {
      dm = analysis_.merge(data_[a], std::move(data_[b]));
      data_[b] = Data{};
    }
    // Every parent of b now has a non-canonical child: it must be re-hashed.
    collect_parents(b, pending_, dm.b && !dm.a);
    splice_parents(a, b);
    if (dm.a) collect_parents(a, analysis_pending_, false);
    if constexpr (requires(A & an) { an.modify(*this, a); })
      if (dm.a) modified_.push_back(a);
    return true;
  }

  /// Restores the invariants (congruence closure, canonical hashcons, joined analysis
  /// data). Returns the number of merges that congruence caused.
  std::size_t rebuild() {
    // Never limited: disarmed for the duration (restored on every exit path).
    struct Disarm {
      EGraph& g;
      const Limits* saved;
      ~Disarm() { g.limits_ = saved; }
    } disarm{*this, limits_};
    limits_ = nullptr;
    std::size_t unions = 0;
    while (!pending_.empty() || !analysis_pending_.empty() || !modified_.empty()) {
      while (!pending_.empty()) {
        Id n = pending_.back();
        pending_.pop_back();
        NodeRec& r = recs_[n];
        if (!r.live) continue;
        bool changed = false;
        for (std::uint32_t s = r.kid_off, e = r.kid_off + r.nkids; s < e; ++s) {
          Id k = find(kids_[s]);
          if (k != kids_[s]) {
            kids_[s] = k;
            changed = true;
          }
        }
        if (!changed) continue;
        if (epoch_ != 0) nstamp_[n] = epoch_;  // (with no epoch started every stamp is 0)
        memo_.erase(r.hash, n);
        NodeView<L> v = node(n);
        std::uint32_t h = hash_node<L>(v.op, v.payload, v.kids);
        r.hash = h;
        Id m = memo_.find_or_insert(h, n, make_key(v.op, v.payload, v.kids),
                                    [&](const Slot& sl) { return same(sl, v.op, v.payload, v.kids); });
        if (m != n) {
          r.live = 0;
          --num_live_;
          unions += merge(n, m) ? 1 : 0;
        }
      }
      while (!analysis_pending_.empty()) {
        Id n = analysis_pending_.back();
        analysis_pending_.pop_back();
        if constexpr (!kEmptyData) {
          if (!recs_[n].live) continue;
          Id c = find(n);
          DidMerge dm = analysis_.merge(data_[c], analysis_.make(*this, node(n)));
          if (dm.a) {
            collect_parents(c, analysis_pending_, false);
            if constexpr (requires(A & an) { an.modify(*this, c); }) modified_.push_back(c);
          }
        }
      }
      if constexpr (requires(A & an) { an.modify(*this, Id{}); }) {
        std::vector<Id> mods;
        mods.swap(modified_);
        for (Id c : mods) analysis_.modify(*this, find(c));
      } else {
        modified_.clear();
      }
    }
    index_valid_ = false;
    return unions;
  }

  /// True when no merge is waiting for `rebuild`.
  bool is_clean() const noexcept {
    return pending_.empty() && analysis_pending_.empty() && modified_.empty();
  }

  // ------------------------------------------------------------------ reading

  /// Live (canonical, distinct) e-nodes; exact after `rebuild`.
  std::size_t num_nodes() const noexcept { return num_live_; }
  /// E-classes.
  std::size_t num_classes() const noexcept { return num_classes_; }
  /// Node ids handed out so far (live and dead); node ids are below this.
  std::size_t num_node_ids() const noexcept { return recs_.size(); }
  /// Increases on every new node and every effective merge: equal versions, same e-graph.
  std::uint64_t version() const noexcept { return version_; }

  /// Starts a new epoch and returns it. Every node created, or whose children rebuild
  /// re-canonicalizes, from now on is stamped with it, and so is every node that the next
  /// index build finds in another class than before. A searcher that has seen (and
  /// applied) everything up to epoch e can then skip matches made only of nodes stamped
  /// before e: each such match was there, binding the same nodes, at epoch e (semi-naive
  /// matching, see Runner).
  std::uint32_t next_epoch() noexcept { return ++epoch_; }
  /// The current epoch.
  std::uint32_t epoch() const noexcept { return epoch_; }

  /// The node with id `nid` (its children may be stale before `rebuild`).
  NodeView<L> node(Id nid) const noexcept {
    const NodeRec& r = recs_[nid];
    return NodeView<L>{r.op, payload(nid), std::span<const Id>(kids_.data() + r.kid_off, r.nkids)};
  }
  /// Op of node `nid`.
  Op op(Id nid) const noexcept { return recs_[nid].op; }
  /// Payload of node `nid`.
  const Payload& payload(Id nid) const noexcept {
    if constexpr (kEmptyPayload) {
      return empty_payload_;
    } else {
      return recs_[nid].payload;
    }
  }
  /// Whether node `nid` is still a canonical node (not removed as a duplicate).
  bool is_live(Id nid) const noexcept { return recs_[nid].live != 0; }
  /// The canonical class of node `nid`.
  Id class_of_node(Id nid) const noexcept { return find(nid); }

  /// The analysis data of class `cls` (any id of the class).
  const Data& data(Id cls) const noexcept {
    if constexpr (kEmptyData) {
      return empty_data_;
    } else {
      return data_[find(cls)];
    }
  }
  /// The analysis object.
  A& analysis() noexcept { return analysis_; }
  const A& analysis() const noexcept { return analysis_; }

  /// The class index of the current (rebuilt) e-graph, built on first use after a change.
  /// Throws luminal::Error unless `is_clean()` (call `rebuild()` first).
  const ClassIndex<L>& index() {
    if (!is_clean()) throw Error("[egraph] index: merges are pending; call rebuild() first");
    if (!index_valid_ || index_version_ != version_) build_index();
    return index_;
  }

  /// Approximate bytes held by the e-graph's arrays.
  std::size_t memory_bytes() const noexcept {
    return recs_.capacity() * sizeof(NodeRec) + kids_.capacity() * 4 * 3 + uf_.capacity() * 4 +
           (nstamp_.capacity() + mclass_.capacity()) * 4 + cls_.capacity() * sizeof(ClassRec) + data_.capacity() * sizeof(Data) + memo_.memory_bytes();
  }

  /// Reserves room for `n` nodes with about `k` child slots in total.
  void reserve(std::size_t n, std::size_t k) {
    recs_.reserve(n);
    kids_.reserve(k);
    pnext_.reserve(k);
    slot_node_.reserve(k);
    uf_.reserve(n);
    nstamp_.reserve(n);
    mclass_.reserve(n);
    cls_.reserve(n);
    if constexpr (!kEmptyData) data_.reserve(n);
    memo_.reserve(n);
  }

 private:
  static constexpr std::size_t kInlineKids = 8;
  static constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
  static constexpr bool kEmptyPayload = std::is_empty_v<Payload>;
  static constexpr bool kEmptyData = std::is_empty_v<Data>;

  // One node, kept in one record so a hashcons probe touches one cache line for the node
  // (plus its children in kids_).
  struct NodeRec {
    [[no_unique_address]] Payload payload;
    std::uint32_t kid_off;  // first child slot in kids_
    std::uint32_t hash;     // hash of the key as stored (the hashcons slot's hash)
    Op op;
    std::uint8_t live;  // 0 once removed as a duplicate by rebuild
    std::uint16_t nkids;
  };
  // What a hashcons slot keeps of a node: enough to compare nodes of up to two children
  // without touching the node arrays.
  struct MemoKey {
    [[no_unique_address]] Payload payload;
    Op op;
    std::uint16_t nkids;
    Id k[2];
  };
  using Memo = Hashcons<MemoKey>;
  using Slot = typename Memo::Slot;

  static MemoKey make_key(Op op, const Payload& p, std::span<const Id> kids) noexcept {
    MemoKey key{};
    if constexpr (!kEmptyPayload) key.payload = p;
    key.op = op;
    key.nkids = static_cast<std::uint16_t>(kids.size());
    key.k[0] = kids.size() > 0 ? kids[0] : kNoId;
    key.k[1] = kids.size() > 1 ? kids[1] : kNoId;
    return key;
  }
  // Whether the node in slot `sl` equals (op, p, kids).
  bool same(const Slot& sl, Op op, const Payload& p, std::span<const Id> kids) const noexcept {
    const MemoKey& k = sl.key;
    if (k.op != op || k.nkids != kids.size()) return false;
    if constexpr (!kEmptyPayload)
      if (!(k.payload == p)) return false;
    const std::size_t nk = kids.size();
    if (nk <= 2) return (nk < 1 || k.k[0] == kids[0]) && (nk < 2 || k.k[1] == kids[1]);
    const Id* stored = kids_.data() + recs_[sl.id].kid_off;
    for (std::size_t i = 0; i < nk; ++i)
      if (stored[i] != kids[i]) return false;
    return true;
  }
  // Per class id: its parent list (slots linked through pnext_, newest first, with a
  // tail for O(1) splicing) and its length (dead entries included until pruned).
  struct ClassRec {
    std::uint32_t phead;
    std::uint32_t ptail;
    std::uint32_t pcount;
  };

  Id push_node(Op op, const Payload& p, std::span<const Id> kids, std::uint32_t h) {
    if (kids.size() > 0xFFFF) throw std::length_error("[egraph] add: a node with more than 65535 children");
    Id n = static_cast<Id>(recs_.size());
    std::uint32_t base = static_cast<std::uint32_t>(kids_.size());
    for (std::size_t i = 0; i < kids.size(); ++i) {
      std::uint32_t s = base + static_cast<std::uint32_t>(i);
      Id k = kids[i];
      kids_.push_back(k);
      slot_node_.push_back(n);
      // Push slot s on the front of class k's parent list: touches only k's record.
      ClassRec& kc = cls_[k];
      pnext_.push_back(kc.phead);
      kc.phead = s;
      if (kc.ptail == kNoSlot) kc.ptail = s;
      ++kc.pcount;
    }
    NodeRec r{};
    if constexpr (!kEmptyPayload) r.payload = p;
    r.kid_off = base;
    r.hash = h;
    r.op = op;
    r.live = 1;
    r.nkids = static_cast<std::uint16_t>(kids.size());
    recs_.push_back(r);
    nstamp_.push_back(epoch_);
    mclass_.push_back(n);
    uf_.push_back(n);
    cls_.push_back(ClassRec{kNoSlot, kNoSlot, 0});
    if constexpr (!kEmptyData) data_.emplace_back();
    ++num_live_;
    ++num_classes_;
    return n;
  }

  // Pushes the live parent nodes of class c onto `out` (and, with also_analysis, onto the
  // analysis worklist), unlinking dead parents from the list as it goes.
  void collect_parents(Id c, std::vector<Id>& out, bool also_analysis) {
    ClassRec& cr = cls_[c];
    std::uint32_t prev = kNoSlot;
    for (std::uint32_t s = cr.phead; s != kNoSlot;) {
      const std::uint32_t next = pnext_[s];
      const Id n = slot_node_[s];
      if (recs_[n].live) {
        out.push_back(n);
        if (also_analysis) analysis_pending_.push_back(n);
        prev = s;
      } else {
        if (prev == kNoSlot) {
          cr.phead = next;
        } else {
          pnext_[prev] = next;
        }
        if (cr.ptail == s) cr.ptail = prev;
        --cr.pcount;
      }
      s = next;
    }
  }

  // Appends b's parent list to a's (O(1) with the tail).
  void splice_parents(Id a, Id b) {
    ClassRec &ca = cls_[a], &cb = cls_[b];
    if (cb.phead == kNoSlot) return;
    if (ca.phead == kNoSlot) {
      ca.phead = cb.phead;
    } else {
      pnext_[ca.ptail] = cb.phead;
    }
    ca.ptail = cb.ptail;
    cb.phead = cb.ptail = kNoSlot;
    ca.pcount += cb.pcount;
    cb.pcount = 0;
  }

  void build_index() {
    ClassIndex<L>& ix = index_;
    const std::size_t n = recs_.size();
    const std::size_t live = num_live_;
    // Counting sort of live nodes by op, then stably by class: class-major, op-minor.
    const std::size_t nops = static_cast<std::size_t>(L::kNumOps);
    std::vector<std::uint32_t> opcount(nops + 1, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (recs_[i].live) ++opcount[op_index<L>(recs_[i].op) + 1];
    for (std::size_t i = 0; i < nops; ++i) opcount[i + 1] += opcount[i];
    PodVector<Id> by_op, cls_of;
    by_op.resize_uninit(live);
    cls_of.resize_uninit(live);
    for (std::size_t i = 0; i < n; ++i)
      if (recs_[i].live) by_op[opcount[op_index<L>(recs_[i].op)]++] = static_cast<Id>(i);
    ix.off_.assign(n + 1, 0);
    std::size_t nslots = 0;
    for (std::size_t j = 0; j < live; ++j) {
      cls_of[j] = find(by_op[j]);
      ++ix.off_[cls_of[j] + 1];
      nslots += recs_[by_op[j]].nkids;
    }
    for (std::size_t i = 0; i < n; ++i) ix.off_[i + 1] += ix.off_[i];
    ix.nodes_.resize_uninit(live);
    {
      PodVector<std::uint32_t> fill;
      fill.resize_uninit(n);
      if (n != 0) std::memcpy(fill.data(), ix.off_.data(), n * sizeof(std::uint32_t));
      for (std::size_t j = 0; j < live; ++j) ix.nodes_[fill[cls_of[j]]++] = by_op[j];
    }
    // Entries: op, payload and children copied in index order.
    ix.ops_.resize(live);
    if constexpr (!kEmptyPayload) ix.epay_.resize(live);
    ix.ekid_off_.resize_uninit(live + 1);
    ix.ekids_.resize_uninit(nslots);
    std::uint32_t at = 0;
    for (std::size_t j = 0; j < live; ++j) {
      const NodeRec& r = recs_[ix.nodes_[j]];
      ix.ops_[j] = r.op;
      if constexpr (!kEmptyPayload) ix.epay_[j] = r.payload;
      ix.ekid_off_[j] = at;
      for (std::uint32_t k = 0; k < r.nkids; ++k) ix.ekids_[at++] = kids_[r.kid_off + k];
    }
    ix.ekid_off_[live] = at;
    ix.estamp_.resize_uninit(live);
    for (std::size_t j = 0; j < live; ++j) {
      const Id nd = ix.nodes_[j];
      const Id c = find(nd);
      if (mclass_[nd] != c) {  // moved into another class since the last index
        mclass_[nd] = c;
        nstamp_[nd] = epoch_;
      }
      ix.estamp_[j] = nstamp_[nd];
    }
    ix.classes_.clear();
    ix.classes_.reserve(num_classes_);
    ix.op_off_.assign(nops + 1, 0);
    for (std::size_t c = 0; c < n; ++c) {
      if (ix.off_[c] == ix.off_[c + 1]) continue;
      ix.classes_.push_back(static_cast<Id>(c));
      std::size_t last = SIZE_MAX;
      for (std::uint32_t j = ix.off_[c]; j < ix.off_[c + 1]; ++j) {
        std::size_t o = op_index<L>(ix.ops_[j]);
        if (o != last) ++ix.op_off_[o + 1];
        last = o;
      }
    }
    for (std::size_t i = 0; i < nops; ++i) ix.op_off_[i + 1] += ix.op_off_[i];
    ix.op_classes_.resize_uninit(ix.op_off_[nops]);
    {
      std::vector<std::uint32_t> fill(ix.op_off_.begin(), ix.op_off_.end());
      for (Id c : ix.classes_) {
        std::size_t last = SIZE_MAX;
        for (std::uint32_t j = ix.off_[c]; j < ix.off_[c + 1]; ++j) {
          std::size_t o = op_index<L>(ix.ops_[j]);
          if (o != last) ix.op_classes_[fill[o]++] = c;
          last = o;
        }
      }
    }
    index_valid_ = true;
    index_version_ = version_;
  }

  A analysis_;
  FlatVector<NodeRec> recs_;  // per node id
  mutable PodVector<Id> uf_;  // per class id (= node id of the node that created it)
  // Per node id: the epoch it was created, had its children re-canonicalized, or was found
  // in another class than at the previous index build (a parent of its new class reaches
  // it without being re-canonicalized itself), whichever is latest.
  PodVector<std::uint32_t> nstamp_;
  PodVector<Id> mclass_;  // per node id: its class at the last index build
  PodVector<ClassRec> cls_;   // per class id
  std::vector<Data> data_;    // per class id; empty when Data is an empty type
  // Per child slot.
  PodVector<Id> kids_;
  PodVector<std::uint32_t> pnext_;
  PodVector<Id> slot_node_;

  Memo memo_;
  std::vector<Id> pending_;
  std::vector<Id> analysis_pending_;
  std::vector<Id> modified_;
  std::size_t num_live_ = 0;
  std::size_t num_classes_ = 0;
  std::uint64_t version_ = 0;
  std::uint32_t epoch_ = 0;
  ClassIndex<L> index_;
  const Limits* limits_ = nullptr;
  std::uint32_t ticks_ = 0;
  bool index_valid_ = false;
  std::uint64_t index_version_ = ~std::uint64_t{0};
  static inline const Payload empty_payload_{};
  static inline const Data empty_data_{};
};

}  // namespace luminal::egraph
