# Stage control for recipes, sourced by run.sh after parse_options.sh (needs $stage, $stop_stage):
#   if stage_wanted 3 units; then ...; stage_done 3 units; fi
#   if stage_wanted 4 train "$exp"; then ...; stage_done 4 train "$exp"; fi
# A finished stage leaves <marks>/<N>.<name>.done and is skipped when the recipe runs again; an
# interrupted stage left no marker and runs again (every step is safe to rerun or resumes). Marks
# live in $stage_marks (default exp/.stages), or in DIR/.stages for a stage given a DIR: stages that
# make a model's outputs pass its --exp dir, so a new --exp trains and decodes again.
# shellcheck shell=bash
stage_marks=${stage_marks:-exp/.stages}

stage_mark() {  # stage_mark N NAME [DIR]: the marker file of a finished stage
  if [ -n "${3:-}" ]; then echo "$3/.stages/$1.$2.done"; else echo "$stage_marks/$1.$2.done"; fi
}

stage_wanted() {  # stage_wanted N NAME [DIR]
  local n=$1 name=$2 mark
  mark=$(stage_mark "$@")
  [ "$n" -ge "$stage" ] && [ "$n" -le "$stop_stage" ] || return 1
  if [ -f "$mark" ]; then
    echo "$(date +%T) stage $n ($name): done before; skipped (delete $mark to redo)"
    return 1
  fi
  echo "$(date +%T) stage $n ($name)"
  return 0
}

stage_done() {  # stage_done N NAME [DIR]
  local mark
  mark=$(stage_mark "$@")
  mkdir -p "$(dirname "$mark")"
  touch "$mark"
}
