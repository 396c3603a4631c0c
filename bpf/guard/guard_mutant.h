/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The process guard's mutation run (issue 22, tests/README.md): a test-only
 * build of both enforcers in which any one program can be made to allow
 * everything, to show that some test fails when that program does.
 *
 * Only tests/guard/CMakeLists.txt defines SF_TEST_MUTANT (for the BPF
 * objects) and SF_GUARD_TEST_MUTANT (for the guard_controller.cc linked into
 * the mutant suites); the shipped objects have neither. Unlike the egress
 * mutants (one object per hook, chosen at build time), the program is chosen
 * at load time, through a read-only global the verifier sees as a constant:
 * the guard has 26 programs, and one object per program would cost a CI
 * build each.
 *
 * Shared by the BPF side (the ids) and the mutant controller (the names).
 */
#ifndef SANDFENCE_BPF_GUARD_GUARD_MUTANT_H_
#define SANDFENCE_BPF_GUARD_GUARD_MUTANT_H_

/* Every guard program, by its name in the objects. */
#define SF_GUARD_PROGS(X)                                                  \
	X(sf_sig_enter) X(sf_sig_exit) X(sf_sig_uring) X(sf_sig_fork)      \
	X(sf_sig_cfiles) X(sf_sig_unstop)                                  \
	X(sf_lsm_ptrace) X(sf_lsm_traceme) X(sf_lsm_open) X(sf_lsm_perm)   \
	X(sf_lsm_kill) X(sf_lsm_bpf) X(sf_lsm_perf) X(sf_lsm_perf_task)    \
	X(sf_lsm_unlink) X(sf_lsm_rmdir) X(sf_lsm_rename)                  \
	X(sf_lsm_setattr) X(sf_lsm_create) X(sf_lsm_mkdir)                 \
	X(sf_lsm_mknod) X(sf_lsm_symlink) X(sf_lsm_link) X(sf_lsm_wopen)   \
	X(sf_lsm_uconnect) X(sf_lsm_usend)

#define SF_GPROG_ID(p) SF_GPROG_##p,
enum sf_guard_prog {
	SF_GPROG_NONE = 0,
	SF_GUARD_PROGS(SF_GPROG_ID)
	SF_GPROG_COUNT
};
#undef SF_GPROG_ID

#if defined(__bpf__) && defined(SF_TEST_MUTANT)
/* Set by the mutant controller from SF_TEST_NEUTRALIZE; 0: none. */
const volatile __u32 sf_test_neutralize = SF_GPROG_NONE;
/* First thing in each program: "allow", as a hook that checks nothing. */
#define SF_MUTANT_ALLOWS(prog)                                             \
	do {                                                               \
		if (sf_test_neutralize == SF_GPROG_##prog)                 \
			return 0;                                          \
	} while (0)
#else
#define SF_MUTANT_ALLOWS(prog) do { } while (0)
#endif

#endif /* SANDFENCE_BPF_GUARD_GUARD_MUTANT_H_ */
