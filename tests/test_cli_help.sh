#!/usr/bin/env bash
# `vt <cmd> --help`, the parser and the README agree (issue 30, item 17):
#   - every spelling in a command's option table (the `.name = {...}` rows of
#     tools/<cmd>.c, and of tools/rope_opts.c where the command appends its rope
#     rows; the parser reads them) appears in `vt <cmd> --help` and is
#     accepted by the binary (no "unknown option");
#   - every option `vt <cmd> --help` lists is in that table (or -h, --help,
#     --version);
#   - every option the README shows in a `vt <cmd> ...` line is in its --help;
#   - the README's job count for scripts/test.sh is the number of jobs it runs.
set -u
vt=${VT_BIN:-./build/vt}
src=${VT_SOURCE_DIR:-.}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
cmds="run inspect quantize synth tokenize bench"
"$vt" serve --help >/dev/null 2>&1 && cmds="$cmds serve"
has_opt() { # text, spelling ([-A-Za-z0-9] only): the spelling as a whole option word
  local re="(^|[[:space:],[])$2([[:space:],=]|\$|])"
  [[ $1 =~ $re ]]
}
declare -A helps
for c in $cmds; do
  help=$("$vt" "$c" --help 2>&1) || { bad "vt $c --help exits non-zero"; continue; }
  helps[$c]=$help
  files=("$src/tools/$c.c") # a command that appends the shared rope rows (tools/rope_opts.c) has those too
  grep -q 'ROPE_OPTS_TABLE' "$src/tools/$c.c" && files+=("$src/tools/rope_opts.c")
  table=$(cat "${files[@]}" | grep -oE '\.name = \{[^}]*\}' | grep -oE '"-[^"]*"' | tr -d '"' | sort -u)
  [ -n "$table" ] && ok || { bad "no option table found in tools/$c.c"; continue; }
  for o in $table; do
    has_opt "$help" "$o" && ok || bad "vt $c: $o is in the table but not in --help"
    err=$("$vt" "$c" "$o" 2>&1 >/dev/null </dev/null)
    [[ $err == *"unknown option"* ]] && bad "vt $c: $o is in the table but refused: $err" || ok
  done
  # the other way: what --help lists is parsed
  listed=$(grep -E '^  -' <<<"$help" | sed 's/  \+[^-].*$//' | grep -oE -- '(^|[ ,])-{1,2}[A-Za-z][A-Za-z0-9-]*' |
           tr -d ' ,' | sort -u)
  for o in $listed; do
    case $o in -h|--help|--version) ok; continue ;; esac
    [[ $'\n'$table$'\n' == *$'\n'"$o"$'\n'* ]] && ok || bad "vt $c --help lists $o, which its table does not have"
  done
done

# README: options shown in `vt <cmd> ...` lines (and their continuation lines)
readme_lines=$(awk '/^vt (run|serve|bench|inspect|quantize|synth|tokenize) / { cmd = $2; print; next }
                    cmd != "" && /^ +\[/ { print "vt " cmd " " $0; next } { cmd = "" }' "$src/README.md")
n_checked=0
while read -r _ c rest; do
  [ -n "$c" ] || continue
  case " $cmds " in *" $c "*) ;; *) continue ;; esac
  help=${helps[$c]}
  rest=${rest%%#*} # drop the comment
  for o in $(grep -oE -- '(^|[ [/])-{1,2}[A-Za-z][A-Za-z0-9-]*' <<<"$rest" | tr -d ' [/'); do
    n_checked=$((n_checked + 1))
    has_opt "$help" "$o" && ok || bad "README shows 'vt $c ... $o', not in vt $c --help"
  done
done <<<"$readme_lines"
[ "$n_checked" -gt 10 ] && ok || bad "only $n_checked README options found: the README's shape changed?"

# README: the job count of scripts/test.sh
jobs=$(sed -n 's/^selected=\${VT_TEST_JOBS:-"\(.*\)"}$/\1/p' "$src/scripts/test.sh" | wc -w)
words=(zero one two three four five six seven eight nine ten)
if [ "$jobs" -gt 0 ] && tr '\n' ' ' <"$src/README.md" | grep -q "then ${words[$jobs]} jobs"; then ok
else bad "README does not say scripts/test.sh runs ${words[$jobs]} jobs ($jobs in its default list)"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
