// Every program of every BPF object the project ships, loaded into the
// running kernel on its own: the object opened from its skeleton,
// configured as production configures it, every other program's autoload
// off, loaded with the verifier's statistics, closed.
//
// Why: a program that loaded on one build of a kernel failed the verifier
// on another build of the same version ("combined stack size ... Too
// large"), and only some skeletons were loaded in tests. Here each program
// is one test case (Every/BpfLoad.Program/<object>__<program>), and the
// run ends with a table of what each load cost the verifier.
//
// What a program needs is found on this host, never from the kernel's
// version string:
//   - an LSM program, BPF LSM that runs (ProbeBpfLsm);
//   - its attach target (LSM hook, BTF tracepoint, iterator) in the
//     kernel's BTF;
//   - every helper it calls, known to the kernel (enum bpf_func_id in its
//     BTF), and every kfunc it calls in the kernel's BTF; which program
//     calls what is read from the object (bpf_elf_calls.h). A kfunc that only
//     other programs of the object call is tried: libbpf 1.1 resolves
//     every extern of an object whatever is autoloaded, and a refusal
//     that names that kfunc is a skip too;
//   - whatever production needs before it loads the object at all (the
//     host's netns cookie, the cgroup Unix hooks).
// A program whose needs are met must load: a refusal fails with the
// verifier's words. One whose needs are not met is skipped with the reason;
// in the VM suite (SANDFENCE_IN_VM=1, BPF LSM booted on), a BPF LSM skip is
// a failure.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bpf_load_objects.h"
#include "common/bpf_handles.h"
#include "common/libbpf_log.h"
#include "egress/egress_controller.h"
#include "gtest/gtest.h"
#include "host/bpf_lsm.h"
#include "probe/bpf_elf_calls.h"
#include "support/test_env.h"

// The objects production configures before load (also listed in
// bpf_load_objects.h; named here so that a renamed object stops the build).
#include "sf_egress.skel.h"
#include "sf_egress_cut.skel.h"
#include "sf_egress_unix.skel.h"
#include "sf_guard_lsm.skel.h"

namespace sandfence {
namespace {

using bpf_elf::ObjectCalls;
using bpf_elf::ProgramCalls;

bool InVm() {
  const char* v = std::getenv("SANDFENCE_IN_VM");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// ---------------------------------------------------------------------------
// Production's configuration, object by object: what EgressController and
// GuardController set before they load. A status of code FailedPrecondition
// or Unavailable means production does not load the object on this kernel
// (the programs skip with it); any other error fails the test.

template <typename S>
absl::Status Configure(S*) {
  return absl::OkStatus();
}

// EgressController::LoadOrOpen. Not set here: sf_skb_has_netns_cookie,
// which production sets from SkbHasNetnsCookie() (not exposed by
// egress_controller.h); it stays false, so the skb program is verified
// without the path that reads the netns cookie.
absl::Status Configure(sf_egress* skel) {
  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  skel->rodata->sf_host_netns = *cookie;
  skel->rodata->sf_mark_outbound = KernelCanCutSockets();
  return absl::OkStatus();
}

// EgressController::LoadCut (its maps are the egress object's there; here
// they are its own, of the same definitions).
absl::Status Configure(sf_egress_cut* skel) {
  if (!KernelCanCutSockets()) {
    return absl::FailedPreconditionError(
        "production does not load it here: KernelCanCutSockets() is false "
        "(no bpf_sock_destroy kfunc)");
  }
  absl::StatusOr<uint64_t> cookie = CurrentNetnsCookie();
  if (!cookie.ok()) return cookie.status();
  skel->rodata->sf_host_netns = *cookie;
  return absl::OkStatus();
}

// The value of a kernel enum's member, from the running kernel's BTF.
std::optional<int64_t> KernelEnumValue(const char* enum_name,
                                       const char* member);

// EgressController::LoadUnix (the cgroup hooks enforcer): loaded only
// where KernelHasUnixHooks(); its two hooks get their attach types before
// load (libbpf 1.1 does not know the sections), as production sets them.
absl::Status Configure(sf_egress_unix* skel) {
  if (!KernelHasUnixHooks()) {
    return absl::FailedPreconditionError(
        "production does not load it here: KernelHasUnixHooks() is false "
        "(no cgroup connect_unix/sendmsg_unix hooks)");
  }
  const std::pair<bpf_program*, const char*> hooks[] = {
      {skel->progs.sf_connect_unix, "BPF_CGROUP_UNIX_CONNECT"},
      {skel->progs.sf_sendmsg_unix, "BPF_CGROUP_UNIX_SENDMSG"},
  };
  for (const auto& [prog, type] : hooks) {
    std::optional<int64_t> v = KernelEnumValue("bpf_attach_type", type);
    if (!v) {
      return absl::InternalError(absl::StrCat(
          "KernelHasUnixHooks() is true, yet the kernel's BTF has no ", type));
    }
    bpf_program__set_expected_attach_type(prog,
                                          static_cast<bpf_attach_type>(*v));
  }
  return absl::OkStatus();
}

// GuardController's LoadEnforcer sets sf_setattr_nargs and sf_perf_nargs
// from the kernel's BTF (ConfigureHookArgs, not exposed by
// guard_controller.h); they keep their defaults here. Both ctx slots are
// read whatever their values, so the verifier's work is the same.
absl::Status Configure(sf_guard_lsm*) { return absl::OkStatus(); }

// ---------------------------------------------------------------------------
// The running kernel.

const btf* KernelBtf() {
  static const btf* vmlinux = btf__load_vmlinux_btf();
  return vmlinux;
}

std::optional<int64_t> KernelEnumValue(const char* enum_name,
                                       const char* member) {
  const btf* b = KernelBtf();
  if (b == nullptr) return std::nullopt;
  const int id = btf__find_by_name_kind(b, enum_name, BTF_KIND_ENUM);
  if (id < 0) return std::nullopt;
  const btf_type* t = btf__type_by_id(b, id);
  const struct btf_enum* e = btf_enum(t);
  for (int k = 0; k < btf_vlen(t); ++k, ++e) {
    if (std::strcmp(btf__name_by_offset(b, e->name_off), member) == 0) {
      return e->val;
    }
  }
  return std::nullopt;
}

// Whether the kernel knows helper `id` (enum bpf_func_id in its BTF); true
// when its BTF cannot tell.
bool KernelKnowsHelper(int32_t id) {
  static const std::optional<std::set<int64_t>> known =
      []() -> std::optional<std::set<int64_t>> {
    const btf* b = KernelBtf();
    if (b == nullptr) return std::nullopt;
    const int tid = btf__find_by_name_kind(b, "bpf_func_id", BTF_KIND_ENUM);
    if (tid < 0) return std::nullopt;
    const btf_type* t = btf__type_by_id(b, tid);
    std::set<int64_t> ids;
    const struct btf_enum* e = btf_enum(t);
    for (int k = 0; k < btf_vlen(t); ++k, ++e) {
      if (!absl::StartsWith(btf__name_by_offset(b, e->name_off),
                            "__BPF_FUNC_MAX_ID")) {
        ids.insert(e->val);
      }
    }
    return ids;
  }();
  return !known || known->count(id) != 0;
}

std::string HelperName(int32_t id) {
#define SF_HELPER_NAME(x) "bpf_" #x
  static const char* const kNames[] = {__BPF_FUNC_MAPPER(SF_HELPER_NAME)};
#undef SF_HELPER_NAME
  if (id >= 0 && static_cast<size_t>(id) < std::size(kNames)) {
    return absl::StrCat(kNames[id], " (#", id, ")");
  }
  return absl::StrCat("#", id);
}

bool KernelHasFunc(const std::string& name) {
  const btf* b = KernelBtf();
  return b != nullptr &&
         btf__find_by_name_kind(b, name.c_str(), BTF_KIND_FUNC) > 0;
}

// The attach target a program of this type needs in the kernel's BTF, as
// libbpf looks it up at load: "" when it needs none.
std::string MissingAttachTarget(const bpf_program* prog) {
  const bpf_prog_type type = bpf_program__type(prog);
  if (type != BPF_PROG_TYPE_LSM && type != BPF_PROG_TYPE_TRACING) return "";
  const btf* b = KernelBtf();
  if (b == nullptr) return "the kernel has no BTF (/sys/kernel/btf/vmlinux)";
  absl::string_view sec = bpf_program__section_name(prog);
  const size_t slash = sec.find('/');
  if (slash == absl::string_view::npos) return "";
  const std::string target(sec.substr(slash + 1));
  std::string name;
  int kind = BTF_KIND_FUNC;
  std::string what;
  switch (bpf_program__expected_attach_type(prog)) {
    case BPF_LSM_MAC:
      name = "bpf_lsm_" + target;
      what = "LSM hook";
      break;
    case BPF_TRACE_RAW_TP:
      name = "btf_trace_" + target;
      kind = BTF_KIND_TYPEDEF;
      what = "BTF tracepoint";
      break;
    case BPF_TRACE_ITER:
      name = "bpf_iter_" + target;
      what = "BPF iterator";
      break;
    default:
      name = target;
      what = "function";
      break;
  }
  if (btf__find_by_name_kind(b, name.c_str(), kind) > 0) return "";
  return absl::StrCat("the kernel has no ", what, " ", target, " (no ", name,
                      " in its BTF)");
}

const absl::Status& BpfLsm() {
  static const absl::Status status = ProbeBpfLsm();
  return status;
}

// ---------------------------------------------------------------------------
// The objects, from bpf/CMakeLists.txt (bpf_load_objects.h).

// The outcome of one load.
struct Load {
  bool loaded = false;
  std::string libbpf;    // libbpf's first warning
  std::string full_log;  // on a refusal: the log at level 1, its tail
  double ms = 0;         // bpf_object__load, maps and CO-RE included
  int err = 0;
};

struct ProgramInfo {
  std::string object;
  std::string program;
  std::string section;
  std::string type;
  std::string error;  // the object or this program could not be read
};

struct ObjectInfo {
  std::string name;
  const void* (*elf_bytes)(size_t*) = nullptr;
  std::string error;
  ObjectCalls calls;
  std::vector<ProgramInfo> programs;
  // Opens the object with its skeleton, configures it as production does,
  // loads only `program` with a log of `log_level` into `log`.
  std::function<absl::Status(const std::string& program, uint32_t log_level,
                             std::string* log, Load* out)>
      load;
};

// The tail of a log: its last `n` lines.
std::string Tail(absl::string_view log, size_t n) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(log, '\n', absl::SkipEmpty());
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - n);
  return absl::StrJoin(lines, "\n");
}

template <typename S>
absl::Status LoadOne(const std::string& program, uint32_t log_level,
                     std::string* log, Load* out) {
  LibbpfLogCapture capture;
  Skeleton<S> skel(S::open());
  if (skel == nullptr) {
    return absl::InternalError(
        absl::StrCat("open: ", std::strerror(errno), " (", capture.first_line(),
                     ")"));
  }
  if (absl::Status s = Configure(skel.get()); !s.ok()) return s;
  bpf_program* target = nullptr;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) {
    const bool mine = program == bpf_program__name(prog);
    bpf_program__set_autoload(prog, mine);
    if (mine) target = prog;
  }
  if (target == nullptr) {
    return absl::InternalError(absl::StrCat("no program ", program));
  }
  // Big enough for a level-1 log's tail (kernels before 6.4 keep its head).
  log->assign(log_level & 1 ? 16u << 20 : 1u << 20, '\0');
  bpf_program__set_log_buf(target, log->data(), log->size());
  bpf_program__set_log_level(target, log_level);
  const auto start = std::chrono::steady_clock::now();
  const int err = bpf_object__load(skel->obj);
  out->ms = std::chrono::duration<double, std::milli>(
                std::chrono::steady_clock::now() - start)
                .count();
  log->resize(std::strlen(log->c_str()));
  out->loaded = err == 0;
  out->err = err;
  out->libbpf = capture.first_line();
  return absl::OkStatus();
}

ObjectInfo ReadObject(const char* name, const void* (*elf_bytes)(size_t*),
                      decltype(ObjectInfo::load) load) {
  ObjectInfo o;
  o.name = name;
  o.elf_bytes = elf_bytes;
  o.load = std::move(load);
  size_t size = 0;
  const void* elf = elf_bytes(&size);
  absl::StatusOr<ObjectCalls> calls = bpf_elf::ReadObjectCalls(elf, size);
  if (!calls.ok()) {
    o.error = absl::StrCat("reading its ELF: ", calls.status().message());
  } else {
    o.calls = *std::move(calls);
  }
  // Opening needs no privileges and no kernel: the list of cases exists
  // everywhere (gtest_discover_tests runs this at build time).
  LibbpfLogCapture capture;
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
  bpf_object* obj = bpf_object__open_mem(elf, size, &opts);
  if (obj == nullptr) {
    o.error = absl::StrCat("open: ", std::strerror(errno), " (",
                           capture.first_line(), ")");
    o.programs.push_back({name, "", "", "", o.error});
    return o;
  }
  bpf_program* prog;
  bpf_object__for_each_program(prog, obj) {
    ProgramInfo p{name, bpf_program__name(prog), bpf_program__section_name(prog),
                  "", o.error};
    const char* type = libbpf_bpf_prog_type_str(bpf_program__type(prog));
    p.type = type != nullptr ? type : "?";
    const bool read = std::any_of(
        o.calls.programs.begin(), o.calls.programs.end(),
        [&](const ProgramCalls& c) { return c.name == p.program; });
    if (p.error.empty() && !read) {
      p.error = "libbpf lists it, the ELF reader (bpf_elf_calls) does not";
    }
    o.programs.push_back(std::move(p));
  }
  if (o.programs.empty()) {
    o.programs.push_back({name, "", "", "", "the object has no programs"});
  }
  bpf_object__close(obj);
  return o;
}

const std::vector<ObjectInfo>& Objects() {
  static const std::vector<ObjectInfo> objects = [] {
    std::vector<ObjectInfo> v;
#define SF_READ_OBJECT(name) \
  v.push_back(ReadObject(#name, &name::elf_bytes, &LoadOne<name>));
    SANDFENCE_BPF_OBJECTS(SF_READ_OBJECT)
#undef SF_READ_OBJECT
    return v;
  }();
  return objects;
}

const ObjectInfo& FindObject(const std::string& name) {
  for (const ObjectInfo& o : Objects()) {
    if (o.name == name) return o;
  }
  std::abort();  // the cases come from Objects()
}

std::vector<ProgramInfo> AllPrograms() {
  std::vector<ProgramInfo> all;
  for (const ObjectInfo& o : Objects()) {
    all.insert(all.end(), o.programs.begin(), o.programs.end());
  }
  return all;
}

// ---------------------------------------------------------------------------
// The table printed at the end.

struct Row {
  std::string object, program, section, kfuncs = "-";
  std::string insns = "-", stack = "-", verify_ms = "-", load_ms = "-";
  std::string result;  // loaded, SKIPPED, FAILED
  std::string reason;  // why skipped or failed
};

std::vector<Row>& Rows() {
  static std::vector<Row> rows;
  return rows;
}

// "processed N insns", "stack depth A+B", "verification time N usec".
void ParseStats(const std::string& log, Row* row) {
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"(processed (\d+) insns)"))) {
    row->insns = m[1];
  }
  if (std::regex_search(log, m, std::regex(R"(stack depth ([0-9+]+))"))) {
    row->stack = m[1];
  }
  if (std::regex_search(log, m,
                        std::regex(R"(verification time (\d+) usec)"))) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", std::stod(m[1]) / 1000.0);
    row->verify_ms = buf;
  }
}

// The verifier's reason in a log of level 4: the last line before its
// statistics ("verification time", "stack depth", "processed").
std::string RefusalLine(absl::string_view log) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "verification time ") ||
        absl::StartsWith(line, "stack depth ") ||
        absl::StartsWith(line, "processed ")) {
      break;
    }
    last = std::string(line);
  }
  return last;
}

class Summary : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::vector<Row>& rows = Rows();
    if (rows.empty()) return;
    // Each distinct reason once, under the table.
    std::vector<std::string> reasons;
    auto note = [&reasons](const std::string& r) {
      auto it = std::find(reasons.begin(), reasons.end(), r);
      if (it == reasons.end()) it = reasons.insert(reasons.end(), r);
      return absl::StrCat("[", it - reasons.begin() + 1, "]");
    };
    std::vector<std::vector<std::string>> cells = {
        {"object", "program", "section", "kfuncs", "insns", "stack depth",
         "verify ms", "load ms", "result"}};
    int loaded = 0, skipped = 0, failed = 0;
    double total_ms = 0;
    for (const Row& r : rows) {
      std::string result = r.result;
      if (!r.reason.empty()) absl::StrAppend(&result, " ", note(r.reason));
      cells.push_back({r.object, r.program, r.section, r.kfuncs, r.insns,
                       r.stack, r.verify_ms, r.load_ms, result});
      if (r.result == "loaded") ++loaded;
      else if (r.result == "SKIPPED") ++skipped;
      else ++failed;
      if (r.load_ms != "-") total_ms += std::stod(r.load_ms);
    }
    std::vector<size_t> width(cells[0].size(), 0);
    for (const auto& line : cells) {
      for (size_t c = 0; c < line.size(); ++c) {
        width[c] = std::max(width[c], line[c].size());
      }
    }
    std::printf("\nbpf_load_test: every program of every object\n");
    for (const auto& line : cells) {
      std::string out;
      for (size_t c = 0; c < line.size(); ++c) {
        // Numbers to the right, words to the left; no padding at the end.
        const bool number = c >= 4 && c <= 7 && c != 5;
        std::string cell = line[c];
        std::string pad(width[c] - cell.size(), ' ');
        if (c + 1 == line.size()) pad.clear();
        absl::StrAppend(&out, c == 0 ? "" : "  ",
                        number ? pad + cell : cell + pad);
      }
      std::printf("%s\n", out.c_str());
    }
    for (size_t k = 0; k < reasons.size(); ++k) {
      std::printf("[%zu] %s\n", k + 1, reasons[k].c_str());
    }
    std::printf("%d loaded, %d skipped, %d failed; %.0f ms in loads\n\n",
                loaded, skipped, failed, total_ms);
    std::fflush(stdout);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummary =
    ::testing::AddGlobalTestEnvironment(new Summary);

// ---------------------------------------------------------------------------

TEST(BpfObjects, EveryObjectOfTheBuildIsHere) {
  EXPECT_EQ(Objects().size(), static_cast<size_t>(SANDFENCE_BPF_OBJECT_COUNT));
  for (const ObjectInfo& o : Objects()) {
    EXPECT_EQ(o.error, "") << o.name;
    EXPECT_FALSE(o.programs.empty()) << o.name;
  }
}

void PrintTo(const ProgramInfo& p, std::ostream* os) {
  *os << p.object << " " << p.program << " (" << p.section << ")";
}

class BpfLoad : public ::testing::TestWithParam<ProgramInfo> {};

// Why this program is not expected to load here (none: it must).
struct Expectation {
  std::vector<std::string> reasons;
  bool lsm_missing = false;  // one reason is BPF LSM's absence
  // Kfuncs of other programs of the object that the kernel lacks: libbpf
  // 1.1 resolves every extern of an object, whatever is autoloaded, so the
  // load is tried, and a refusal that names one of them is a skip.
  std::map<std::string, std::string> others_missing;  // kfunc -> caller
};

Expectation Expect(const ObjectInfo& o, const ProgramCalls& mine,
                   const bpf_program* prog) {
  Expectation e;
  if (bpf_program__type(prog) == BPF_PROG_TYPE_LSM && !BpfLsm().ok()) {
    e.lsm_missing = true;
    e.reasons.push_back(
        absl::StrCat("BPF LSM is not active: ", BpfLsm().message()));
  }
  if (std::string t = MissingAttachTarget(prog); !t.empty()) {
    e.reasons.push_back(t);
  }
  for (int32_t id : mine.helpers) {
    if (!KernelKnowsHelper(id)) {
      e.reasons.push_back(
          absl::StrCat("the kernel lacks helper ", HelperName(id)));
    }
  }
  for (const std::string& k : mine.kfuncs) {
    if (!o.calls.weak_externs.count(k) && !KernelHasFunc(k)) {
      e.reasons.push_back(absl::StrCat("the kernel's BTF lacks kfunc ", k,
                                       ", which this program calls"));
    }
  }
  for (const ProgramCalls& c : o.calls.programs) {
    for (const std::string& k : c.kfuncs) {
      if (!mine.kfuncs.count(k) && !o.calls.weak_externs.count(k) &&
          !KernelHasFunc(k)) {
        e.others_missing.emplace(k, c.name);
      }
    }
  }
  return e;
}

TEST_P(BpfLoad, Program) {
  const ProgramInfo& p = GetParam();
  Row row;
  row.object = p.object;
  row.program = p.program;
  row.section = p.section;
  row.result = "FAILED";
  struct Record {
    Row* row;
    ~Record() { Rows().push_back(*row); }
  } record{&row};
  if (!p.error.empty()) row.reason = p.error;
  ASSERT_EQ(p.error, "") << p.object << ": " << p.program;
  const ObjectInfo& o = FindObject(p.object);
  const ProgramCalls* mine = nullptr;
  for (const ProgramCalls& c : o.calls.programs) {
    if (c.name == p.program) mine = &c;
  }
  ASSERT_NE(mine, nullptr);
  if (!mine->kfuncs.empty()) row.kfuncs = absl::StrJoin(mine->kfuncs, ",");
  if (::geteuid() != 0) {
    row.result = "SKIPPED";
    row.reason = "needs root";
  }
  SANDFENCE_REQUIRE_ROOT();

  // The expectation, from an open of the object that loads nothing.
  Expectation e;
  {
    LibbpfLogCapture capture;
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = p.object.c_str());
    size_t size = 0;
    const void* elf = o.elf_bytes(&size);
    bpf_object* obj = bpf_object__open_mem(elf, size, &opts);
    ASSERT_NE(obj, nullptr) << capture.first_line();
    bpf_program* prog =
        bpf_object__find_program_by_name(obj, p.program.c_str());
    if (prog != nullptr) e = Expect(o, *mine, prog);
    bpf_object__close(obj);
    ASSERT_NE(prog, nullptr);
  }

  std::string log;
  Load load;
  absl::Status configured = absl::OkStatus();
  if (e.reasons.empty()) {
    configured = o.load(p.program, 4, &log, &load);
    if (absl::IsFailedPrecondition(configured) ||
        absl::IsUnavailable(configured)) {
      // What production checks before it loads the object.
      e.reasons.push_back(std::string(configured.message()));
      configured = absl::OkStatus();
    } else if (configured.ok() && !load.loaded) {
      for (const auto& [k, caller] : e.others_missing) {
        if (absl::StrContains(load.libbpf, absl::StrCat("'", k, "'"))) {
          e.reasons.push_back(absl::StrCat(
              "the kernel's BTF lacks kfunc ", k, ", which ", caller,
              " of this object calls, and libbpf refuses the whole object "
              "for it (", load.libbpf, ")"));
        }
      }
    }
  }
  if (!e.reasons.empty()) {
    const std::string why = absl::StrJoin(e.reasons, "; ");
    row.result = "SKIPPED";
    row.reason = why;
    if (e.lsm_missing && InVm()) {
      row.result = "FAILED";
      row.reason = absl::StrCat("in the VM, BPF LSM must run: ", why);
      FAIL() << "in the VM, BPF LSM must run: " << why;
    }
    GTEST_SKIP() << why;
  }
  if (!configured.ok()) row.reason = std::string(configured.message());
  ASSERT_TRUE(configured.ok()) << "configuring " << p.object
                               << " as production does: " << configured;
  ParseStats(log, &row);
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.1f", load.ms);
  row.load_ms = ms;
  if (load.loaded) {
    row.result = "loaded";
    return;
  }
  // Refused: again at log level 1, for what the verifier did last.
  std::string full;
  Load again;
  if (o.load(p.program, 1 | 4, &full, &again).ok()) {
    load.full_log = Tail(full, 25);
  }
  const std::string refusal = RefusalLine(log);
  row.reason = !refusal.empty()        ? refusal
               : !load.libbpf.empty() ? load.libbpf
                                      : "(no reason given)";
  FAIL() << p.object << ": program " << p.program << " (" << p.section << ", "
         << p.type << ") must load here and was refused: "
         << std::strerror(-load.err) << "\nlibbpf: " << load.libbpf
         << "\nthe verifier (log level 4):\n"
         << Tail(log, 25) << "\nthe verifier's last lines at log level 1:\n"
         << load.full_log;
}

INSTANTIATE_TEST_SUITE_P(
    Every, BpfLoad, ::testing::ValuesIn(AllPrograms()),
    [](const ::testing::TestParamInfo<ProgramInfo>& param) {
      std::string name =
          param.param.object + "__" +
          (param.param.program.empty() ? std::string("unreadable")
                                       : param.param.program);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace sandfence
