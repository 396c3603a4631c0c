#!/bin/bash
# The generated man pages and bash completion match the built binary
# (issue 19): every command `sandfence help` lists has its page, every flag
# of its --help is in that page, the pages render without groff warnings,
# and the completion offers the commands and their flags.
#
# usage: docs_test.sh BUILD_DIR
set -u
build=$1
bin=$build/userspace/cli/sandfence
docs=$build/generated/docs
fail() { echo "FAIL: $*"; exit 1; }

[ -x "$bin" ] || fail "no $bin: build the sandfence target"
[ -f "$docs/man8/sandfence.8" ] || fail "no $docs/man8/sandfence.8: build the sandfence_docs target (part of all)"
[ "$bin" -nt "$docs/man8/sandfence.8" ] &&
	fail "the man pages are older than the binary: build the sandfence_docs target"

help=$("$bin" help) || fail "sandfence help exited $?"
# "  records get ROLLOUT  summary": the lower-case words are the command.
pages=()
while IFS= read -r line; do
	words=$(printf '%s\n' "${line%%  *}" | tr ' ' '\n' | grep -v '^[A-Z]' | paste -sd' ')
	[ -n "$words" ] && pages+=("$words")
done < <(printf '%s\n' "$help" | sed -n '/^commands:$/,/^$/{/^  /s/^  //p}')
[ "${#pages[@]}" -ge 8 ] || fail "sandfence help lists ${#pages[@]} commands: ${pages[*]}"

version=$("$bin" --version) || fail "sandfence --version exited $?"
grep -qF "\"$version\"" "$docs/man8/sandfence.8" || fail "sandfence.8 does not name \"$version\""

for words in "${pages[@]}"; do
	read -ra argv <<<"$words"
	page="$docs/man8/sandfence-${words// /-}.8"
	[ -f "$page" ] || fail "\"sandfence $words\" has no page $(basename "$page")"
	gzip -dc "$docs/man8.gz/$(basename "$page").gz" 2>/dev/null | cmp -s "$page" - ||
		fail "man8.gz/$(basename "$page").gz (what is installed) differs from $(basename "$page")"
	grep -qF "\\fBsandfence-${words// /-}\\fR(8)" "$docs/man8/sandfence.8" ||
		fail "sandfence.8 does not point to sandfence-${words// /-}(8)"
	text=$("$bin" "${argv[@]}" --help) || fail "sandfence $words --help exited $?"
	for flag in $(printf '%s\n' "$text" | grep -o -- '^ *--[a-z][a-z0-9-]*' | tr -d ' '); do
		grep -qF -- "${flag//-/\\-}" "$page" || fail "$(basename "$page") lacks $flag of sandfence $words --help"
	done
done
if command -v groff >/dev/null; then
	for page in "$docs"/man8/*.8; do
		warn=$(groff -man -ww -z "$page" 2>&1)
		[ -z "$warn" ] || fail "groff warns about $(basename "$page"): $warn"
	done
fi
command -v groff >/dev/null || echo "note: groff absent, pages not rendered"

# Bash completion: commands at the first word, a command's flags after it.
complete_words() {
	bash -c '
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _sandfence
		printf "%s\n" "${COMPREPLY[@]}"' _ "$docs/bash-completion/sandfence" "$@"
}
[ "$(complete_words sandfence rollo)" = rollouts ] || fail "completion of \"sandfence rollo\": $(complete_words sandfence rollo)"
[ "$(complete_words sandfence run --gu)" = --guard ] || fail "completion of \"sandfence run --gu\": $(complete_words sandfence run --gu)"
[ "$(complete_words sandfence records g)" = get ] || fail "completion of \"sandfence records g\": $(complete_words sandfence records g)"
[ "$(complete_words sandfence records get x --js)" = --json ] || fail "completion of \"sandfence records get x --js\""
[ "$(complete_words sandfence daemon --clea)" = --cleanup ] || fail "completion of \"sandfence daemon --clea\""
echo "PASS: ${#pages[@]} command pages, sandfence.8 and the completion match $version"
