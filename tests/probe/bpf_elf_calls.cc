#include "probe/bpf_elf_calls.h"

#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sandfence::bpf_elf {
namespace {

constexpr size_t kInsnSize = 8;
constexpr uint8_t kCall = 0x85;      // BPF_JMP | BPF_CALL
constexpr uint8_t kLdImm64 = 0x18;   // BPF_LD | BPF_IMM | BPF_DW
constexpr uint8_t kPseudoCall = 1;   // a call to a BPF function
constexpr uint8_t kPseudoFunc = 4;   // a function's address (a callback)

struct Insn {
  uint8_t code;
  uint8_t src;
  int32_t imm;
};

Insn Decode(const uint8_t* p) {
  Insn i;
  i.code = p[0];
  i.src = (p[1] >> 4) & 0x0f;
  std::memcpy(&i.imm, p + 4, 4);
  return i;
}

// A STT_FUNC symbol in an executable section.
struct Func {
  std::string name;
  std::string section;
  size_t shndx = 0;
  uint64_t offset = 0;  // bytes into its section
  uint64_t size = 0;
  bool program = false;  // an entry point (not in .text)
  std::set<int32_t> helpers;
  std::set<std::string> kfuncs;
  std::set<size_t> callees;  // subprograms called and callbacks passed
};

struct ElfDeleter {
  void operator()(Elf* e) const { elf_end(e); }
};

// Everything f reaches, into out (a DAG: the verifier refuses recursion;
// `seen` stops a cycle anyway).
void Collect(const std::vector<Func>& funcs, size_t f, std::set<size_t>* seen,
             ProgramCalls* out) {
  if (!seen->insert(f).second) return;
  out->helpers.insert(funcs[f].helpers.begin(), funcs[f].helpers.end());
  out->kfuncs.insert(funcs[f].kfuncs.begin(), funcs[f].kfuncs.end());
  for (size_t c : funcs[f].callees) Collect(funcs, c, seen, out);
}

}  // namespace

absl::StatusOr<ObjectCalls> ReadObjectCalls(const void* elf_bytes,
                                            size_t size) {
  elf_version(EV_CURRENT);
  // libelf wants a mutable image; it keeps pointing into it.
  std::string image(static_cast<const char*>(elf_bytes), size);
  std::unique_ptr<Elf, ElfDeleter> elf(elf_memory(image.data(), image.size()));
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) {
    return absl::InvalidArgumentError("not an ELF object");
  }
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) {
    return absl::InvalidArgumentError("no section name table");
  }

  struct Section {
    std::string name;
    bool exec = false;
    Elf_Data* data = nullptr;
  };
  std::map<size_t, Section> sections;
  Elf_Scn* symtab = nullptr;
  GElf_Shdr symtab_hdr{};
  std::vector<std::pair<size_t, Elf_Scn*>> rel_sections;  // target, section
  for (Elf_Scn* scn = nullptr;
       (scn = elf_nextscn(elf.get(), scn)) != nullptr;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf.get(), shstrndx, sh.sh_name);
    Section s;
    s.name = name != nullptr ? name : "";
    s.exec = sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR);
    if (s.exec) s.data = elf_getdata(scn, nullptr);
    sections[elf_ndxscn(scn)] = s;
    if (sh.sh_type == SHT_SYMTAB) {
      symtab = scn;
      symtab_hdr = sh;
    } else if (sh.sh_type == SHT_REL) {
      rel_sections.emplace_back(sh.sh_info, scn);
    }
  }
  if (symtab == nullptr) return absl::InvalidArgumentError("no symbol table");

  ObjectCalls out;
  std::vector<Func> funcs;
  std::map<std::pair<size_t, uint64_t>, size_t> by_start;
  Elf_Data* sym_data = elf_getdata(symtab, nullptr);
  const size_t n_syms = symtab_hdr.sh_size / symtab_hdr.sh_entsize;
  std::vector<GElf_Sym> symbols(n_syms);
  std::vector<std::string> sym_names(n_syms);
  for (size_t k = 0; k < n_syms; ++k) {
    gelf_getsym(sym_data, static_cast<int>(k), &symbols[k]);
    const GElf_Sym& sym = symbols[k];
    const char* name = elf_strptr(elf.get(), symtab_hdr.sh_link, sym.st_name);
    sym_names[k] = name != nullptr ? name : "";
    if (sym.st_shndx == SHN_UNDEF && GELF_ST_BIND(sym.st_info) == STB_WEAK) {
      out.weak_externs.insert(sym_names[k]);
    }
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
    auto sec = sections.find(sym.st_shndx);
    if (sec == sections.end() || !sec->second.exec) continue;
    Func f;
    f.name = sym_names[k];
    f.section = sec->second.name;
    f.shndx = sym.st_shndx;
    f.offset = sym.st_value;
    f.size = sym.st_size;
    f.program = f.section != ".text";
    by_start[{f.shndx, f.offset}] = funcs.size();
    funcs.push_back(std::move(f));
  }
  auto func_at = [&](size_t shndx, int64_t offset) -> std::optional<size_t> {
    if (offset < 0) return std::nullopt;
    auto it = by_start.upper_bound({shndx, static_cast<uint64_t>(offset)});
    if (it == by_start.begin()) return std::nullopt;
    --it;
    if (it->first.first != shndx) return std::nullopt;
    const Func& f = funcs[it->second];
    if (static_cast<uint64_t>(offset) >= f.offset + f.size) return std::nullopt;
    return it->second;
  };

  // Relocations: (section, byte offset of the instruction) -> symbol.
  std::map<std::pair<size_t, uint64_t>, size_t> relocs;
  for (auto [target, scn] : rel_sections) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    Elf_Data* d = elf_getdata(scn, nullptr);
    const size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t k = 0; k < n; ++k) {
      GElf_Rel rel;
      gelf_getrel(d, static_cast<int>(k), &rel);
      relocs[{target, rel.r_offset}] = GELF_R_SYM(rel.r_info);
    }
  }

  for (Func& f : funcs) {
    const Section& sec = sections[f.shndx];
    if (sec.data == nullptr || f.offset + f.size > sec.data->d_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.name, ": outside its section"));
    }
    const auto* base = static_cast<const uint8_t*>(sec.data->d_buf) + f.offset;
    const size_t n_insns = f.size / kInsnSize;
    for (size_t k = 0; k < n_insns; ++k) {
      const Insn i = Decode(base + k * kInsnSize);
      const uint64_t at = f.offset + k * kInsnSize;
      const auto rel = relocs.find({f.shndx, at});
      const GElf_Sym* sym =
          rel == relocs.end() ? nullptr : &symbols[rel->second];
      if (i.code == kLdImm64) {
        ++k;  // the second half of the 16-byte instruction
        // A function's address (a callback, as bpf_loop takes one): a
        // relocation to an executable section, or already marked.
        const bool func_addr =
            sym != nullptr ? sections[sym->st_shndx].exec
                           : i.src == kPseudoFunc;
        if (!func_addr) continue;
        const size_t shndx = sym != nullptr ? sym->st_shndx : f.shndx;
        // As libbpf resolves it: the address's imm is a byte offset.
        const int64_t target =
            sym != nullptr
                ? static_cast<int64_t>(sym->st_value) + i.imm
                : static_cast<int64_t>(at) +
                      (static_cast<int64_t>(i.imm) + 1) * kInsnSize;
        std::optional<size_t> callee = func_at(shndx, target);
        if (!callee) {
          return absl::InvalidArgumentError(absl::StrCat(
              f.name, ": the address of an unknown function"));
        }
        f.callees.insert(*callee);
        continue;
      }
      if (i.code != kCall) continue;
      if (sym != nullptr && sym->st_shndx == SHN_UNDEF) {
        // An extern function: a kfunc (libbpf marks the call
        // BPF_PSEUDO_KFUNC_CALL when it finds it in the kernel's BTF).
        f.kfuncs.insert(sym_names[rel->second]);
        continue;
      }
      if (sym == nullptr && i.src != kPseudoCall) {
        f.helpers.insert(i.imm);
        continue;
      }
      // A BPF-to-BPF call; its imm counts instructions after the symbol
      // (or after this instruction, within one section).
      const size_t shndx = sym != nullptr ? sym->st_shndx : f.shndx;
      const int64_t target =
          (sym != nullptr ? static_cast<int64_t>(sym->st_value)
                          : static_cast<int64_t>(at)) +
          (static_cast<int64_t>(i.imm) + 1) * kInsnSize;
      std::optional<size_t> callee = func_at(shndx, target);
      if (!callee) {
        return absl::InvalidArgumentError(
            absl::StrCat(f.name, ": a call to an unknown function"));
      }
      f.callees.insert(*callee);
    }
  }

  for (size_t f = 0; f < funcs.size(); ++f) {
    if (!funcs[f].program) continue;
    ProgramCalls p;
    p.name = funcs[f].name;
    p.section = funcs[f].section;
    std::set<size_t> seen;
    Collect(funcs, f, &seen, &p);
    out.programs.push_back(std::move(p));
  }
  return out;
}

}  // namespace sandfence::bpf_elf
