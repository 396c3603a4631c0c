# sandfence_bpf_object(NAME SOURCE [VMLINUX] [DEPENDS hdr...])
#
# Compiles SOURCE (a .bpf.c) with clang for the BPF target and generates a
# libbpf skeleton with `bpftool gen skeleton`. Creates an INTERFACE target
# `NAME_skel` that C++ links against to get `NAME.skel.h` on its include path.
#
# VMLINUX: the program uses kernel types (tracing, LSM); vmlinux.h is
# generated once from the running kernel's BTF and put on the include path.
# Generated files are ordered through targets, because add_custom_command
# outputs are only visible inside the directory that declares them.
#
# Every object passes bpf/tools/stack_check before it exists: no call chain
# over SANDFENCE_BPF_STACK_LIMIT bytes or SANDFENCE_BPF_MAX_FRAMES frames.
#
# Test-only variants (the egress mutation run): DEFINES adds -D flags,
# OUT_DIR puts the object and skeleton in their own directory, and
# SKEL_NAME names the skeleton (default NAME), so that a variant's
# `SKEL_NAME.skel.h` can stand in for the real one.

find_program(SANDFENCE_CLANG NAMES clang clang-14 REQUIRED)
find_program(SANDFENCE_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

set(SANDFENCE_BPF_OUT ${CMAKE_BINARY_DIR}/bpf-gen CACHE INTERNAL "")
file(MAKE_DIRECTORY ${SANDFENCE_BPF_OUT})

# The stack budget every program's deepest call chain must fit
# (bpf/tools/stack_check.cc): the verifier's limit is 512 bytes, and how it
# counts differs between builds of one kernel, so the build keeps a margin.
set(SANDFENCE_BPF_STACK_LIMIT 384 CACHE STRING
    "Largest combined stack (bytes) of a BPF program's call chain")
set(SANDFENCE_BPF_MAX_FRAMES 6 CACHE STRING
    "Most nested BPF call frames (the verifier allows 8)")
if(NOT TARGET sandfence_stack_check)
  add_executable(sandfence_stack_check
                 ${CMAKE_CURRENT_LIST_DIR}/../bpf/tools/stack_check.cc)
  target_link_libraries(sandfence_stack_check PRIVATE elf)
endif()

if(NOT TARGET sandfence_vmlinux)
  add_custom_command(
    OUTPUT ${SANDFENCE_BPF_OUT}/vmlinux.h
    COMMAND ${SANDFENCE_BPFTOOL} btf dump file /sys/kernel/btf/vmlinux format c
            > ${SANDFENCE_BPF_OUT}/vmlinux.h.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${SANDFENCE_BPF_OUT}/vmlinux.h.tmp
            ${SANDFENCE_BPF_OUT}/vmlinux.h
    COMMENT "Generating vmlinux.h from the running kernel's BTF")
  add_custom_target(sandfence_vmlinux DEPENDS ${SANDFENCE_BPF_OUT}/vmlinux.h)
endif()

function(sandfence_bpf_object name source)
  cmake_parse_arguments(ARG "VMLINUX" "OUT_DIR;SKEL_NAME" "DEPENDS;DEFINES"
                        ${ARGN})
  get_filename_component(src ${source} ABSOLUTE)
  if(NOT ARG_OUT_DIR)
    set(ARG_OUT_DIR ${SANDFENCE_BPF_OUT})
  endif()
  if(NOT ARG_SKEL_NAME)
    set(ARG_SKEL_NAME ${name})
  endif()
  file(MAKE_DIRECTORY ${ARG_OUT_DIR})
  set(obj ${ARG_OUT_DIR}/${ARG_SKEL_NAME}.bpf.o)
  set(skel ${ARG_OUT_DIR}/${ARG_SKEL_NAME}.skel.h)

  set(flags -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror
      -I${CMAKE_SOURCE_DIR}/bpf -I${SANDFENCE_BPF_OUT}
      -idirafter /usr/include/x86_64-linux-gnu)
  foreach(d ${ARG_DEFINES})
    list(APPEND flags -D${d})
  endforeach()
  set(deps ${src} ${ARG_DEPENDS})
  if(ARG_VMLINUX)
    list(APPEND deps ${SANDFENCE_BPF_OUT}/vmlinux.h)
  endif()

  # The object exists only once its stack check passed: a chain over the
  # budget fails the build, and the next build tries again.
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${SANDFENCE_CLANG} ${flags} -c ${src} -o ${obj}.tmp
    COMMAND sandfence_stack_check --limit ${SANDFENCE_BPF_STACK_LIMIT}
            --max-frames ${SANDFENCE_BPF_MAX_FRAMES} ${obj}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${obj}.tmp ${obj}
    DEPENDS ${deps} sandfence_stack_check
    IMPLICIT_DEPENDS C ${src}
    COMMENT "BPF ${name}.bpf.o ${ARG_DEFINES}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${SANDFENCE_BPFTOOL} gen skeleton ${obj} name ${ARG_SKEL_NAME}
            > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "Skeleton ${name} (${ARG_SKEL_NAME}.skel.h)"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  if(ARG_VMLINUX)
    add_dependencies(${name}_skel_gen sandfence_vmlinux)
  endif()

  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${ARG_OUT_DIR}
                             ${CMAKE_SOURCE_DIR}/bpf)
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
  # bpftool writes bool globals as C's _Bool, which g++ accepts in C++ and
  # clang++ does not (the sanitizer and fuzz builds use clang).
  target_compile_definitions(${name}_skel INTERFACE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:_Bool=bool>)
endfunction()
