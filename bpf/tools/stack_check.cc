// Reads BPF objects and prints, for every program, its worst chain of
// nested calls and what that chain costs in stack; fails above a budget.
//
// Why: the verifier refuses a program whose deepest call chain needs more
// than 512 bytes of stack, and how it counts moved between two builds of one
// kernel version (a 624-byte chain passed on one and failed on the other).
// The build keeps every chain far below the limit, so that the next kernel
// build does not find the edge for us.
//
// The model is conservative: each frame is the deepest stack offset any of
// its instructions touches or takes the address of, plus the 24 bytes the
// verifier adds to a frame whose bpf_loop it inlines (three saved
// registers), rounded up to 32 bytes with a minimum of 32 (the
// interpreter's granularity, coarser than the JIT's 16). Calls are
// BPF-to-BPF calls (BPF_PSEUDO_CALL) and callbacks passed by address
// (BPF_PSEUDO_FUNC, as bpf_loop takes them).
//
//   stack_check [--limit BYTES] [--max-frames N] OBJECT...
//
// Exit status: 0 when every chain fits; 1 when one does not; 2 on a bad
// object or usage.
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr int kInsnSize = 8;
constexpr uint8_t kClassMask = 0x07;
constexpr uint8_t kLdx = 0x01, kSt = 0x02, kStx = 0x03, kAlu = 0x04,
                  kJmp = 0x05, kJmp32 = 0x06, kAlu64 = 0x07, kLd = 0x00;
constexpr uint8_t kCallOp = 0x80, kExitOp = 0x90;
constexpr uint8_t kMovXAlu64 = 0xbf, kAddKAlu64 = 0x07, kSubKAlu64 = 0x17;
constexpr uint8_t kLdImm64 = 0x18;
constexpr uint8_t kPseudoCall = 1, kPseudoFunc = 4;
constexpr int kFramePointer = 10;
constexpr int32_t kHelperLoop = 181;  // BPF_FUNC_loop
constexpr int kInlinedLoopBytes = 24;

struct Insn {
  uint8_t code;
  uint8_t dst;
  uint8_t src;
  int16_t off;
  int32_t imm;
};

Insn Decode(const uint8_t* p) {
  Insn i;
  i.code = p[0];
  i.dst = p[1] & 0x0f;
  i.src = (p[1] >> 4) & 0x0f;
  std::memcpy(&i.off, p + 2, 2);
  std::memcpy(&i.imm, p + 4, 4);
  return i;
}

// A function: a STT_FUNC symbol in an executable section.
struct Func {
  std::string name;
  std::string section;
  size_t shndx = 0;
  uint64_t offset = 0;  // bytes into its section
  uint64_t size = 0;
  bool program = false;  // an entry point (not in .text)
  int depth = 0;         // deepest stack byte touched
  std::set<size_t> callees;
};

struct Object {
  std::string path;
  std::vector<Func> funcs;
  // (section index, offset) -> function index
  std::map<std::pair<size_t, uint64_t>, size_t> by_start;
};

int RoundFrame(int depth) {
  int d = std::max(depth, 1);
  return (d + 31) / 32 * 32;
}

// The function that contains (shndx, offset), if any.
std::optional<size_t> FuncAt(const Object& o, size_t shndx, uint64_t offset) {
  auto it = o.by_start.upper_bound({shndx, offset});
  if (it == o.by_start.begin()) return std::nullopt;
  --it;
  if (it->first.first != shndx) return std::nullopt;
  const Func& f = o.funcs[it->second];
  if (offset >= f.offset + f.size) return std::nullopt;
  return it->second;
}

// The deepest stack offset a function's instructions reach: direct r10
// accesses, and registers that hold r10 plus a constant (how clang passes a
// stack buffer to a helper or a callee).
int StackDepth(const uint8_t* code, size_t n_insns) {
  int depth = 0;
  bool calls_loop = false;
  std::optional<int64_t> fp_off[11];
  auto note = [&depth](int64_t off) {
    if (off < 0 && -off > depth) depth = static_cast<int>(-off);
  };
  for (size_t k = 0; k < n_insns; ++k) {
    Insn i = Decode(code + k * kInsnSize);
    uint8_t cls = i.code & kClassMask;
    if (i.code == kLdImm64) {
      if (i.dst <= 10) fp_off[i.dst].reset();
      ++k;  // the second half of the 16-byte instruction
      continue;
    }
    switch (cls) {
      case kLdx:
        if (i.src == kFramePointer) note(i.off);
        else if (i.src <= 10 && fp_off[i.src]) note(*fp_off[i.src] + i.off);
        if (i.dst <= 10) fp_off[i.dst].reset();
        break;
      case kSt:
      case kStx:
        if (i.dst == kFramePointer) note(i.off);
        else if (i.dst <= 10 && fp_off[i.dst]) note(*fp_off[i.dst] + i.off);
        break;
      case kAlu64:
        if (i.code == kMovXAlu64 && i.src == kFramePointer) {
          fp_off[i.dst] = 0;
        } else if (i.code == kMovXAlu64 && i.src <= 10 && fp_off[i.src]) {
          fp_off[i.dst] = fp_off[i.src];
        } else if (i.code == kAddKAlu64 && i.dst <= 10 && fp_off[i.dst]) {
          *fp_off[i.dst] += i.imm;
          note(*fp_off[i.dst]);
        } else if (i.code == kSubKAlu64 && i.dst <= 10 && fp_off[i.dst]) {
          *fp_off[i.dst] -= i.imm;
          note(*fp_off[i.dst]);
        } else if (i.dst <= 10) {
          fp_off[i.dst].reset();
        }
        break;
      case kAlu:
        if (i.dst <= 10) fp_off[i.dst].reset();
        break;
      case kJmp:
      case kJmp32:
        if ((i.code & 0xf0) == kCallOp) {
          if (i.src == 0 && i.imm == kHelperLoop) calls_loop = true;
          for (int r = 0; r <= 5; ++r) fp_off[r].reset();
        } else if ((i.code & 0xf0) == kExitOp) {
          for (auto& r : fp_off) r.reset();
          fp_off[kFramePointer] = 0;
        }
        break;
      case kLd:
      default:
        break;
    }
  }
  return calls_loop ? depth + kInlinedLoopBytes : depth;
}

bool Fail(const std::string& what) {
  std::fprintf(stderr, "stack_check: %s\n", what.c_str());
  return false;
}

bool ReadObject(const std::string& path, Object* out) {
  out->path = path;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail(path + ": " + std::strerror(errno));
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (elf == nullptr) {
    close(fd);
    return Fail(path + ": not an ELF object");
  }
  size_t shstrndx = 0;
  elf_getshdrstrndx(elf, &shstrndx);

  struct Section {
    std::string name;
    bool exec = false;
    Elf_Data* data = nullptr;
  };
  std::map<size_t, Section> sections;
  Elf_Scn* symtab = nullptr;
  GElf_Shdr symtab_hdr{};
  std::vector<std::pair<size_t, Elf_Scn*>> rel_sections;  // target, section
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    size_t idx = elf_ndxscn(scn);
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    Section s;
    s.name = name ? name : "";
    s.exec = sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR);
    if (s.exec) s.data = elf_getdata(scn, nullptr);
    sections[idx] = s;
    if (sh.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_hdr = sh;
    } else if (sh.sh_type == SHT_REL) {
      rel_sections.emplace_back(sh.sh_info, scn);
    }
  }
  if (symtab == nullptr) {
    elf_end(elf);
    close(fd);
    return Fail(path + ": no symbol table");
  }
  Elf_Data* syms = elf_getdata(symtab, nullptr);
  size_t n_syms = symtab_hdr.sh_size / symtab_hdr.sh_entsize;
  std::vector<GElf_Sym> symbols(n_syms);
  for (size_t k = 0; k < n_syms; ++k) {
    gelf_getsym(syms, static_cast<int>(k), &symbols[k]);
    const GElf_Sym& sym = symbols[k];
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
    auto sec = sections.find(sym.st_shndx);
    if (sec == sections.end() || !sec->second.exec) continue;
    Func f;
    f.name = elf_strptr(elf, symtab_hdr.sh_link, sym.st_name);
    f.section = sec->second.name;
    f.shndx = sym.st_shndx;
    f.offset = sym.st_value;
    f.size = sym.st_size;
    f.program = f.section != ".text";
    out->by_start[{f.shndx, f.offset}] = out->funcs.size();
    out->funcs.push_back(f);
  }

  // Relocations on call instructions: (section, insn offset) -> symbol.
  std::map<std::pair<size_t, uint64_t>, size_t> relocs;
  for (auto [target, scn] : rel_sections) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    Elf_Data* d = elf_getdata(scn, nullptr);
    size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t k = 0; k < n; ++k) {
      GElf_Rel rel;
      gelf_getrel(d, static_cast<int>(k), &rel);
      relocs[{target, rel.r_offset}] = GELF_R_SYM(rel.r_info);
    }
  }

  for (Func& f : out->funcs) {
    const Section& sec = sections[f.shndx];
    const auto* base = static_cast<const uint8_t*>(sec.data->d_buf) + f.offset;
    size_t n_insns = f.size / kInsnSize;
    f.depth = StackDepth(base, n_insns);
    for (size_t k = 0; k < n_insns; ++k) {
      Insn i = Decode(base + k * kInsnSize);
      uint64_t at = f.offset + k * kInsnSize;
      auto rel = relocs.find({f.shndx, at});
      bool call = i.code == (kJmp | kCallOp) && i.src == kPseudoCall;
      // A 64-bit load of an address in an executable section is a callback
      // (libbpf marks it BPF_PSEUDO_FUNC when it relocates the object).
      bool func_addr =
          i.code == kLdImm64 &&
          (i.src == kPseudoFunc ||
           (rel != relocs.end() &&
            sections[symbols[rel->second].st_shndx].exec));
      if (!call && !func_addr) {
        if (i.code == kLdImm64) ++k;
        continue;
      }
      size_t target_shndx = f.shndx;
      int64_t target_off;
      if (rel != relocs.end()) {
        // As libbpf resolves them: a call's imm counts instructions after
        // the symbol; a function address's imm is a byte offset.
        const GElf_Sym& sym = symbols[rel->second];
        // An extern (a kfunc): no frame of the program's own.
        if (sym.st_shndx == SHN_UNDEF) {
          if (func_addr) ++k;
          continue;
        }
        target_shndx = sym.st_shndx;
        target_off = call ? static_cast<int64_t>(sym.st_value) +
                                (static_cast<int64_t>(i.imm) + 1) * kInsnSize
                          : static_cast<int64_t>(sym.st_value) + i.imm;
      } else {
        target_off = static_cast<int64_t>(at) +
                     (static_cast<int64_t>(i.imm) + 1) * kInsnSize;
      }
      std::optional<size_t> callee =
          target_off < 0 ? std::nullopt
                         : FuncAt(*out, target_shndx,
                                  static_cast<uint64_t>(target_off));
      if (!callee) {
        elf_end(elf);
        close(fd);
        return Fail(path + ": " + f.name + ": a call to an unknown function");
      }
      f.callees.insert(*callee);
      if (func_addr) ++k;
    }
  }
  elf_end(elf);
  close(fd);
  return true;
}

struct Chain {
  int bytes = 0;
  std::vector<size_t> frames;
};

// The costliest chain from f (a DAG: BPF has no recursion, and the
// verifier refuses it).
Chain Worst(const Object& o, size_t f, std::map<size_t, Chain>* memo,
            std::set<size_t>* on_path, bool* cycle) {
  if (auto it = memo->find(f); it != memo->end()) return it->second;
  if (!on_path->insert(f).second) {
    *cycle = true;
    return {};
  }
  Chain best;
  for (size_t c : o.funcs[f].callees) {
    Chain sub = Worst(o, c, memo, on_path, cycle);
    if (sub.bytes > best.bytes ||
        (sub.bytes == best.bytes && sub.frames.size() > best.frames.size()))
      best = sub;
  }
  on_path->erase(f);
  Chain mine;
  mine.bytes = RoundFrame(o.funcs[f].depth) + best.bytes;
  mine.frames.push_back(f);
  mine.frames.insert(mine.frames.end(), best.frames.begin(), best.frames.end());
  (*memo)[f] = mine;
  return mine;
}

// The longest chain in frames (the verifier also caps the call depth).
size_t Deepest(const Object& o, size_t f, std::map<size_t, size_t>* memo) {
  if (auto it = memo->find(f); it != memo->end()) return it->second;
  (*memo)[f] = 1;  // cycles are reported by Worst()
  size_t best = 0;
  for (size_t c : o.funcs[f].callees) best = std::max(best, Deepest(o, c, memo));
  (*memo)[f] = best + 1;
  return best + 1;
}

std::string Basename(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

int main(int argc, char** argv) {
  int limit = 384;
  size_t max_frames = 6;
  std::vector<std::string> paths;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    if (a == "--limit" && k + 1 < argc) {
      limit = std::atoi(argv[++k]);
    } else if (a == "--max-frames" && k + 1 < argc) {
      max_frames = static_cast<size_t>(std::atoi(argv[++k]));
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr,
                   "usage: stack_check [--limit BYTES] [--max-frames N] "
                   "OBJECT...\n");
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty() || limit <= 0) {
    std::fprintf(stderr, "stack_check: no object given\n");
    return 2;
  }
  bool over = false;
  for (const std::string& path : paths) {
    Object o;
    if (!ReadObject(path, &o)) return 2;
    std::map<size_t, Chain> memo;
    std::map<size_t, size_t> depth_memo;
    for (size_t f = 0; f < o.funcs.size(); ++f) {
      if (!o.funcs[f].program) continue;
      std::set<size_t> on_path;
      bool cycle = false;
      Chain c = Worst(o, f, &memo, &on_path, &cycle);
      size_t frames = Deepest(o, f, &depth_memo);
      std::string chain;
      for (size_t x : c.frames) {
        if (!chain.empty()) chain += " > ";
        chain += o.funcs[x].name + " " + std::to_string(o.funcs[x].depth);
      }
      bool bad = cycle || c.bytes > limit || frames > max_frames;
      over = over || bad;
      std::printf("%s %-16s %-28s %4d bytes (limit %d) %zu frames: %s%s\n",
                  bad ? "OVER" : "ok  ", Basename(path).c_str(),
                  o.funcs[f].name.c_str(), c.bytes, limit, frames,
                  chain.c_str(), cycle ? " (recursion)" : "");
    }
  }
  return over ? 1 : 0;
}
