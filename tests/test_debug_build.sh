#!/usr/bin/env bash
# A Debug build (cmake -DCMAKE_BUILD_TYPE=Debug: -O0, still -Werror) builds: GCC
# at -O0 drops the unroll annotation of a loop it does not keep as a loop with a
# warning ("ignoring loop annotation"), which -Werror makes an error, so the
# kernels annotate only through VT_UNROLL (cpu/unroll.h), empty when not
# optimizing. Checked: no `GCC unroll` pragma in src/ outside cpu/unroll.h, and
# the files that include it compile at -O0 with this build's own commands
# (compile_commands.json), into /dev/null.
set -u
. "${VT_SOURCE_DIR:-.}/tests/server/lib.sh" # src; require_file
build=${VT_BUILD_DIR:-./build}
pass=0 fail=0
hits=$(cd "$src" && grep -rnE '(_Pragma\(|#[[:space:]]*pragma).*GCC unroll' src | grep -v '^src/cpu/unroll.h:')
if [ -n "$hits" ]; then
  echo "FAIL: GCC unroll pragmas outside cpu/unroll.h (use VT_UNROLL(n)):"
  echo "$hits"
  fail=$((fail + 1))
else
  pass=$((pass + 1))
fi
db="$build/compile_commands.json"
require_file "$db" # under CI=true a failure counted with the check above, else a skip
out=$(python3 - "$db" "$src" <<'PY'
import json, os, re, shlex, subprocess, sys
db, src = sys.argv[1], os.path.realpath(sys.argv[2])
passed = failed = 0
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e['directory'], e['file']))
    if not f.startswith(os.path.join(src, 'src') + os.sep) or not f.endswith('.c'):
        continue
    if '#include "cpu/unroll.h"' not in open(f, errors='replace').read():
        continue
    args = shlex.split(e['command']) if 'command' in e else list(e['arguments'])
    args = [a for a in args if not re.fullmatch(r'-O[0-9sgz]?', a)]
    args[args.index('-o') + 1] = '/dev/null'
    args.insert(1, '-O0')
    r = subprocess.run(args, cwd=e['directory'], capture_output=True, text=True)
    if r.returncode == 0:
        passed += 1
    else:
        failed += 1
        print('FAIL %s at -O0:\n%s' % (os.path.relpath(f, src), r.stderr[-2000:]))
if passed + failed == 0:
    failed += 1
    print('FAIL no file of %s includes cpu/unroll.h' % db)
print('%d %d' % (passed, failed))
PY
)
echo "$out" | sed '$d'
read -r p f <<<"$(echo "$out" | tail -1)"
pass=$((pass + ${p:-0})) fail=$((fail + ${f:-1}))
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
