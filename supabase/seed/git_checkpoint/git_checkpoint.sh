#!/usr/bin/env bash
# A checkpoint of a git working tree, or its restoration, with git's plumbing only: nothing
# here touches the branch, the index or the files while creating, and a restore first keeps
# the state it replaces as a checkpoint of its own.
#
#   create:  a commit of every file but the ignored ones (through a scratch index), whose
#            first parent records the index and whose second is HEAD (if any), kept under
#            refs/kiwi/checkpoints/<id> so that no gc removes it
#   restore: the files as they were (files made since are removed, ignored ones untouched),
#            the index as it was, and HEAD moved back with `reset --soft` if it moved
set -euo pipefail
export HOME=/tmp GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 LC_ALL=C
action="${KIWI_PARAM_ACTION:?}"
worktree="${KIWI_PARAM_WORKTREE:?}"

fail() { printf 'git_checkpoint: %s\n' "$*" >&2; exit 1; }
g() { git -c safe.directory='*' -c user.name=kiwi -c user.email=kiwi@localhost -C "$worktree" "$@"; }

[ -d "$worktree" ] || fail "$worktree is not a directory this tool can reach (the sandbox mounts \${KIWI_WORKTREE:-.})"
top="$(g rev-parse --show-toplevel 2>/dev/null)" || fail "$worktree is not in a git working tree"
worktree="$top"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# A commit of the working tree as it is now, its index and HEAD; prints its id.
snapshot() {
  local head index_tree tree index_commit commit
  head="$(g rev-parse -q --verify 'HEAD^{commit}' || true)"
  index_tree="$(g write-tree)" || fail "the index has unmerged paths: finish or abort the merge first"
  rm -f "$scratch/index"
  tree="$(GIT_INDEX_FILE="$scratch/index" g add -A . && GIT_INDEX_FILE="$scratch/index" g write-tree)"
  index_commit="$(g commit-tree "$index_tree" ${head:+-p "$head"} -m "kiwi checkpoint: the index")"
  commit="$(g commit-tree "$tree" -p "$index_commit" ${head:+-p "$head"} -m "kiwi checkpoint: $1")"
  g update-ref "refs/kiwi/checkpoints/$commit" "$commit"
  printf '%s' "$commit"
}

head_now() { g rev-parse -q --verify 'HEAD^{commit}' || true; }

case "$action" in
  create)
    commit="$(snapshot "before a run")"
    printf '{"checkpoint": "%s", "head": "%s"}\n' "$commit" "$(head_now)"
    ;;
  restore)
    checkpoint="${KIWI_PARAM_CHECKPOINT:-}"
    [[ "$checkpoint" =~ ^[0-9a-f]{40}([0-9a-f]{24})?$ ]] || fail "checkpoint must be a commit id, not '$checkpoint'"
    g rev-parse -q --verify "refs/kiwi/checkpoints/$checkpoint" >/dev/null \
      || fail "no checkpoint $checkpoint in $worktree (refs/kiwi/checkpoints/)"
    before="$(snapshot "before rolling back to $checkpoint")"
    # the files: from the tree just taken to the checkpoint's, in a scratch index that matches them
    # (snapshot left its scratch index: the files as they are, which is the tree just taken)
    GIT_INDEX_FILE="$scratch/index" g update-index -q --refresh >/dev/null || true
    GIT_INDEX_FILE="$scratch/index" g read-tree -m -u "$before^{tree}" "$checkpoint^{tree}"
    # HEAD, if the checkpoint had one and it moved since (later commits stay in the reflog)
    if then_head="$(g rev-parse -q --verify "$checkpoint^2" 2>/dev/null)" && [ "$then_head" != "$(head_now)" ]; then
      g reset -q --soft "$then_head"
    fi
    g read-tree "$checkpoint^1^{tree}"  # the index as it was
    printf '{"restored": "%s", "before_rollback": "%s", "head": "%s"}\n' "$checkpoint" "$before" "$(head_now)"
    ;;
  *) fail "action must be create or restore, not '$action'" ;;
esac
