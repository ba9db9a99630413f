#!/usr/bin/env bash
# The build enforces the layering (docs/architecture.md): a layer sees only its own headers and
# those of the layers below it. This check proves the mechanism still bites: for every layer, a
# file that includes a header of each layer it may use compiles with that layer's include path,
# and a file that includes a header of any other layer does not.
# Usage: layering.sh SOURCE_DIR CC
set -u
src=$1
cc=${2:-cc}
layers="core fs isolation net egress images sandbox persist tools code http cluster native opensandbox app"
# What each layer may see (itself and everything below it), as CMakeLists.txt links them.
declare -A sees=(
        [core]="core"
        [fs]="fs core"
        [isolation]="isolation fs core"
        [net]="net core"
        [egress]="egress core"
        [images]="images isolation fs net core"
        [sandbox]="sandbox egress images isolation fs net core"
        [persist]="persist sandbox egress images isolation fs net core"
        [tools]="tools isolation fs net core"
        [code]="code sandbox egress images isolation fs net core"
        [http]="http core"
        [cluster]="cluster http net core"
        [native]="native cluster http persist tools code sandbox egress images isolation fs net core"
        [opensandbox]="opensandbox cluster http persist tools code sandbox egress images isolation fs net core"
        [app]="app native opensandbox cluster http persist tools code sandbox egress images isolation fs net core"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# No header outside a layer's directory.
stray=$(find "$src/include" -name '*.h' | grep -v -E "^$src/include/($(echo $layers | tr ' ' '|'))/sh/[^/]+\.h$")
if [ -n "$stray" ]; then
        echo "headers outside include/<layer>/sh/: $stray"
        fail=1
fi
for layer in $layers; do
        flags=""
        for l in ${sees[$layer]}; do
                flags="$flags -I$src/include/$l"
        done
        for other in $layers; do
                h=$(ls "$src/include/$other/sh/" | head -n 1)
                printf '#include "sh/%s"\n' "$h" > "$tmp/probe.c"
                if $cc -D_GNU_SOURCE -fsyntax-only $flags $(pkg-config --cflags libmicrohttpd libcjson 2>/dev/null) "$tmp/probe.c" 2>/dev/null; then
                        seen=yes
                else
                        seen=no
                fi
                case " ${sees[$layer]} " in
                *" $other "*) want=yes ;;
                *) want=no ;;
                esac
                if [ "$seen" != "$want" ]; then
                        echo "layer $layer including $other's sh/$h: compiles=$seen, should be $want"
                        fail=1
                fi
        done
done
[ $fail -eq 0 ] && echo "layering holds for: $layers"
exit $fail
