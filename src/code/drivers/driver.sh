# sandbox-host's code driver for bash (src/code/drivers/driver.sh), run inside a sandbox as
#   bash -c <this text> sandbox-host-code <cwd> <result_max>
# Cells come on fd 0 ("<decimal length>\n" then that many bytes of code), the cell's output
# goes to fds 1 and 2, frames go to fd 3, one JSON object a line (sh/codeframe.h): ready or
# fail once, then per cell at most one error and exactly one done (bash has no results).
# Each cell is sourced by this very shell (not a subshell, not a function: its variables,
# declare's included, its functions, cd, traps and options last), from a process substitution,
# with fd 0 /dev/null and both of the driver's fds closed for its time (bash keeps its own
# copies close-on-exec while a redirection lasts), so neither the cell nor its children read
# cells or write frames. A cell whose last status is not 0 ends with an error frame
# CommandExecError <status>; `exit` (or `set -e` and a failure) ends the shell: the context.
# SIGINT while a cell runs: `return 130` from the trap ends the sourced cell, a builtin loop
# included, unless it runs inside a function of the cell's (then that function returns and the
# cell goes on) or the cell set a trap of its own; a foreground command gets the signal itself
# (the daemon sends it to every process of the context). Between cells SIGINT is ignored.
__sh_cwd=${1-}
__sh_max=${2-}

# $1 as a JSON string (with its quotes) in __sh_j: \ and " escaped, control characters as
# \uXXXX (the text's other bytes as they are).
__sh_json() {
        local s=$1 c i
        s=${s//\\/\\\\}
        s=${s//\"/\\\"}
        s=${s//$'\n'/\\n}
        s=${s//$'\t'/\\t}
        s=${s//$'\r'/\\r}
        for ((i = 1; i < 32; i++)); do
                printf -v c "\\x$(printf %02x "$i")"
                [[ $s == *"$c"* ]] && s=${s//"$c"/$(printf '\\u%04x' "$i")}
        done
        __sh_j="\"$s\""
}

__sh_frame() {
        printf '%s\n' "$1" >&"$__sh_frames" || exit 1
}

__sh_fail() {
        __sh_json "$1"
        __sh_frame "{\"t\":\"fail\",\"msg\":$__sh_j}"
        exit 1
}

trap '' INT
# Frames on a fd of bash's choosing (>= 10) instead of 3, the cells' pipe likewise, /dev/null
# on 0.
exec {__sh_frames}>&3 3>&- || exit 1
exec {__sh_cells}<&0 </dev/null || __sh_fail "stdin: cannot move the cells' pipe"
[[ $__sh_max =~ ^[0-9]{1,19}$ ]] || __sh_fail "bad result_max '$__sh_max'"
if [[ -n $__sh_cwd ]]; then
        cd -- "$__sh_cwd" 2>/dev/null || __sh_fail "cwd '$__sh_cwd': cannot change to it"
fi
set -- # the cell starts with no positional parameters
__sh_frame '{"t":"ready"}'

while :; do
        # A cell: its length, then its bytes (read -N counts bytes in the C locale). read drops
        # a NUL byte without counting it, so a cell holding one would be read past its end: the
        # daemon's cells never do (its JSON intake refuses \u0000).
        IFS= read -r -u "$__sh_cells" __sh_len || exit 0
        [[ $__sh_len =~ ^[0-9]{1,12}$ ]] || exit 2
        __sh_code=
        if ((__sh_len > 0)); then
                LC_ALL=C IFS= read -r -d '' -N "$__sh_len" -u "$__sh_cells" __sh_code
                ((${#__sh_code} > 0)) || exit 2
        fi
        trap 'return 130 2>/dev/null' INT
        . <(printf '%s' "$__sh_code") {__sh_frames}>&- {__sh_cells}<&-
        __sh_status=$?
        trap '' INT
        if ((__sh_status != 0)); then
                __sh_frame "{\"t\":\"error\",\"ename\":\"CommandExecError\",\"evalue\":\"$__sh_status\",\"traceback\":[]}"
        fi
        __sh_frame '{"t":"done"}'
done
