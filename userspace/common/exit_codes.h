// The sysexits(3) codes sandfence's commands exit with, defined once for
// every command (the CLI's and the records commands alike).
#ifndef SANDFENCE_COMMON_EXIT_CODES_H_
#define SANDFENCE_COMMON_EXIT_CODES_H_

namespace sandfence {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 64;     // EX_USAGE
inline constexpr int kExitDataErr = 65;   // EX_DATAERR: malformed input
// EX_NOINPUT: an input file (a policy, a record) cannot be opened or read.
inline constexpr int kExitNoInput = 66;
inline constexpr int kExitSoftware = 70;  // EX_SOFTWARE: internal error
// EX_CANTCREAT: an output file (--events-out) cannot be created.
inline constexpr int kExitCantCreate = 73;
inline constexpr int kExitTempFail = 75;  // EX_TEMPFAIL: try again
inline constexpr int kExitNoPerm = 77;    // EX_NOPERM
inline constexpr int kExitConfig = 78;    // EX_CONFIG: rejected

}  // namespace sandfence

#endif  // SANDFENCE_COMMON_EXIT_CODES_H_
