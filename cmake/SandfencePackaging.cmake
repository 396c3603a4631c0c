# Installation layout and the Debian package.
#
# `cmake --install build --prefix /usr` (or the .deb, whose prefix is /usr)
# lays out what packaging/sandfence.service expects:
#   /usr/sbin/sandfence                       the binary (ExecStart)
#   /usr/lib/systemd/system/sandfence.service the unit (/lib on Debian 12 is
#                                             the same directory, usrmerge)
#   /etc/sandfence/policies/*.textproto       the shipped policies (--policy-dir)
#   /usr/share/doc/sandfence/                 docs/*.md (Documentation=)
#   /usr/share/man/man8/sandfence*.8          generated from --help
#   /usr/share/bash-completion/completions/sandfence
#   /usr/share/containers/oci/hooks.d/sandfence-*.json  the OCI hook, for
#                                             podman and CRI-O (packaging/oci)
#   /usr/libexec/sandfence/sandfence-enter    `enter` statically linked, for
#                                             container entrypoints (bound
#                                             into images: packaging/oci)
#   /usr/share/sandfence/proto/sandfence/v1/*.proto  the API, for clients in
#                                             any language
# and, as the python3-sandfence package (component "python"):
#   /usr/lib/python3/dist-packages/sandfence/ the Python client, with the
#                                             modules generated from proto/
# /run/sandfence and /var/lib/sandfence are the unit's RuntimeDirectory and
# StateDirectory: systemd creates them, and the package owns neither, so
# removing it leaves records and state alone.
include(GNUInstallDirs)
# `cpack` and `make install` install what is built; they need not build
# every test first (the sandfence_deb target builds what it ships).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)
# What names no component is the daemon's package, "sandfence".
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME sandfence)

# The unit names /etc/sandfence/policies whatever the prefix, so the
# policies go to an absolute directory (DESTDIR still applies).
set(SANDFENCE_INSTALL_SYSCONFDIR "/etc" CACHE PATH
    "Where etc/sandfence/policies is installed (absolute; the unit expects /etc)")

install(TARGETS sandfence RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
if(TARGET sandfence-enter)
  install(TARGETS sandfence-enter
          RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sandfence)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/packaging/sandfence.service
        DESTINATION lib/systemd/system)
file(GLOB SANDFENCE_SHIPPED_POLICIES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/policies/*.textproto)
install(FILES ${SANDFENCE_SHIPPED_POLICIES}
        DESTINATION ${SANDFENCE_INSTALL_SYSCONFDIR}/sandfence/policies)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/oci/sandfence-create.json
              ${PROJECT_SOURCE_DIR}/packaging/oci/sandfence-stop.json
        DESTINATION share/containers/oci/hooks.d)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/proto/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sandfence/proto
        FILES_MATCHING PATTERN "*.proto")

# The Python client as Debian lays out a module (python3 finds it without
# a venv): python/generate.py builds the whole package, with the API
# modules generated from proto/ by the system protoc and grpc_python_plugin
# (protobuf-compiler-grpc, which the C++ build needs too).
file(GLOB_RECURSE SANDFENCE_PY_SOURCES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/python/sandfence/*.py
     ${PROJECT_SOURCE_DIR}/proto/*.proto)
set(SANDFENCE_PY_OUT ${PROJECT_BINARY_DIR}/generated/python)
add_custom_command(
  OUTPUT ${SANDFENCE_PY_OUT}.stamp
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${SANDFENCE_PY_OUT}
  COMMAND /usr/bin/python3 -B ${PROJECT_SOURCE_DIR}/python/generate.py
          --out ${SANDFENCE_PY_OUT} --proto-dir ${PROJECT_SOURCE_DIR}/proto
  COMMAND ${CMAKE_COMMAND} -E touch ${SANDFENCE_PY_OUT}.stamp
  DEPENDS ${SANDFENCE_PY_SOURCES} ${PROJECT_SOURCE_DIR}/python/generate.py
  COMMENT "Building the Python client package"
  VERBATIM)
add_custom_target(sandfence_python ALL DEPENDS ${SANDFENCE_PY_OUT}.stamp)
install(DIRECTORY ${SANDFENCE_PY_OUT}/sandfence
        DESTINATION lib/python3/dist-packages
        COMPONENT python
        PATTERN "__pycache__" EXCLUDE)

file(GLOB SANDFENCE_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${SANDFENCE_DOCS}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Man pages and bash completion, generated from the built binary's --help
# texts (packaging/gen-docs.py), so they cannot drift from it. The outputs
# depend on the binary: any change to it regenerates them.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(SANDFENCE_DOCS_DIR ${PROJECT_BINARY_DIR}/generated/docs)
# The pages are whatever `sandfence help` lists, so they are installed as
# a directory; the stamp stands for all of them.
set(SANDFENCE_DOCS_STAMP ${SANDFENCE_DOCS_DIR}.stamp)
add_custom_command(
  OUTPUT ${SANDFENCE_DOCS_STAMP}
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${SANDFENCE_DOCS_DIR}
  COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${SANDFENCE_SOURCE_DATE_EPOCH}
          ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/packaging/gen-docs.py
          $<TARGET_FILE:sandfence> ${SANDFENCE_DOCS_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${SANDFENCE_DOCS_STAMP}
  DEPENDS sandfence ${PROJECT_SOURCE_DIR}/packaging/gen-docs.py
  COMMENT "Generating man pages and bash completion from sandfence --help"
  VERBATIM)
# In ALL, so `cmake --install` always finds them.
add_custom_target(sandfence_docs ALL DEPENDS ${SANDFENCE_DOCS_STAMP})
# Compressed, as Debian policy wants man pages.
install(DIRECTORY ${SANDFENCE_DOCS_DIR}/man8.gz/
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man8
        FILES_MATCHING PATTERN "*.8.gz")
install(FILES ${SANDFENCE_DOCS_DIR}/bash-completion/sandfence
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)

# The .deb: `cpack -G DEB --config build/CPackConfig.cmake` in build/, or
# the sandfence_deb target. Depends: comes from dpkg-shlibdeps, so it names
# the Debian 12 libraries the binary links (libbpf1, libgrpc++1.51, ...).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sandfence)
set(CPACK_PACKAGE_VENDOR sandfence)
set(CPACK_PACKAGE_CONTACT "sandfence maintainers <sandfence@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "eBPF egress and process enforcement for AI-agent sandboxes")
set(CPACK_PACKAGE_DESCRIPTION
    "A node daemon and command-line tool that confine the sandboxes AI agents
run in during RL rollouts: cgroup BPF egress allowlists per sandbox, a
process guard, and rollout records. Ships a systemd unit (not enabled).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Debian's version syntax: the git description's "-" would start a Debian
# revision, so it becomes "."; "0.1.0+g1bbde13.dirty".
string(REPLACE "-" "." _sandfence_deb_version "${SANDFENCE_VERSION_STRING}")
set(CPACK_DEBIAN_PACKAGE_VERSION "${_sandfence_deb_version}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# RelWithDebInfo carries debug info; the package ships the stripped binary.
set(CPACK_STRIP_FILES ON)
# Conffiles: the shipped policies (an operator's edits survive upgrades;
# `dpkg -r` keeps them, `dpkg -P` removes them). Maintainer scripts: reload
# systemd after install and removal, stop the daemon before removal (its
# enforcement stays pinned, as after any stop).
set(_sandfence_conffiles "")
foreach(_p IN LISTS SANDFENCE_SHIPPED_POLICIES)
  get_filename_component(_n ${_p} NAME)
  string(APPEND _sandfence_conffiles
         "${SANDFENCE_INSTALL_SYSCONFDIR}/sandfence/policies/${_n}\n")
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/generated/deb/conffiles "${_sandfence_conffiles}")
foreach(_script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/deb/${_script}
                 ${PROJECT_BINARY_DIR}/generated/deb/${_script} COPYONLY)
endforeach()
# Two packages from one source: sandfence (the daemon and CLI) and
# python3-sandfence (the client, architecture-independent), so a framework
# host installs the client without the daemon and the reverse.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL sandfence python)
set(CPACK_DEBIAN_SANDFENCE_PACKAGE_NAME sandfence)
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-sandfence)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3 (>= 3.9), python3-grpcio, python3-protobuf")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
    "Python client for the sandfence daemon
Start rollouts, switch phases, run processes in sandboxes and read records
over the daemon's gRPC socket; sync (sandfence.Client) and asyncio
(sandfence.aio.AsyncClient), with typed errors.")
set(CPACK_COMPONENT_SANDFENCE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_DEBIAN_SANDFENCE_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/generated/deb/conffiles
    ${PROJECT_BINARY_DIR}/generated/deb/postinst
    ${PROJECT_BINARY_DIR}/generated/deb/prerm
    ${PROJECT_BINARY_DIR}/generated/deb/postrm)
include(CPack)

# Builds the package into build/packages/ (the test in tests/package uses
# it). Depends on the binary and the generated docs, so it is up to date.
add_custom_target(sandfence_deb
  COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${PROJECT_BINARY_DIR}/CPackConfig.cmake
          -B ${PROJECT_BINARY_DIR}/packages
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "Building the sandfence .deb"
  VERBATIM)
add_dependencies(sandfence_deb sandfence sandfence_docs sandfence_python)
if(TARGET sandfence-enter)
  add_dependencies(sandfence_deb sandfence-enter)
endif()
