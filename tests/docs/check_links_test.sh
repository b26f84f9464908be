#!/usr/bin/env bash
# tools/check-links on a small tree made here: the links that resolve (files, directories,
# headings as GitHub anchors them, repeated headings, explicit anchors, URLs, code) pass; a
# missing file, a missing heading of another file or of the same one, and a path out of the
# tree each fail, named with file and line, and make the exit status 1.
# Usage: tests/docs/check_links_test.sh SOURCE_DIR
set -euo pipefail
check=${1:?usage: check_links_test.sh SOURCE_DIR}/tools/check-links
work=$(mktemp -d "${TMPDIR:-/tmp}/partq-links.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "check_links_test: FAIL: $*" >&2; exit 1; }

mkdir -p "$work/tree/sub"
cat >"$work/tree/sub/b.md" <<'MD'
# B's title
## A heading, with `code` (and punctuation)!
## Again
## Again
<a id="made-by-hand"></a>
MD
cat >"$work/tree/good.md" <<'MD'
# Good
[a file](sub/b.md), [a directory](sub), [a heading](sub/b.md#a-heading-with-code-and-punctuation),
[the repeat](sub/b.md#again-1), [an anchor](sub/b.md#made-by-hand), [here](#good),
![an image](sub/b.md) [a URL](https://example.com/x.md#nothing) [mail](mailto:a@b.c)
`[in code](missing.md)`
```
[in a fence](missing.md)
```
MD
cat >"$work/tree/bad.md" <<'MD'
# Bad
[gone](missing.md)
[no heading](sub/b.md#no-such-heading)
[not here](#nope)
[out](../outside.md)
MD
touch "$work/outside.md"

"$check" --root "$work/tree" "$work/tree/good.md" >"$work/good.out" 2>&1 ||
  fail "links that resolve were refused: $(cat "$work/good.out")"
if "$check" --root "$work/tree" >"$work/all.out" 2>&1; then
  fail "broken links passed: $(cat "$work/all.out")"
fi
for expected in "bad.md:2: broken link missing.md" "bad.md:3: broken link sub/b.md#no-such-heading" \
                "bad.md:4: broken link #nope" "bad.md:5: broken link ../outside.md"; do
  grep -qF "$expected" "$work/all.out" || fail "no \"$expected\" in: $(cat "$work/all.out")"
done
grep -q "good.md" "$work/all.out" && fail "good.md reported: $(cat "$work/all.out")"
grep -qF "4 broken link(s)" "$work/all.out" || fail "not 4 broken links: $(cat "$work/all.out")"
echo "check_links_test: OK"
