# Stage control for recipes, sourced by run.sh after parse_options.sh (needs $stage, $stop_stage):
#   if stage_wanted 3 units; then ...; stage_done 3 units; fi
# A finished stage leaves <marks>/<N>.<name>.done and is skipped when the recipe runs again; an
# interrupted stage left no marker and runs again (every step is safe to rerun or resumes).
# shellcheck shell=bash
stage_marks=${stage_marks:-exp/.stages}

stage_wanted() {  # stage_wanted N NAME
  local n=$1 name=$2
  [ "$n" -ge "$stage" ] && [ "$n" -le "$stop_stage" ] || return 1
  if [ -f "$stage_marks/$n.$name.done" ]; then
    echo "$(date +%T) stage $n ($name): done before; skipped (delete $stage_marks/$n.$name.done to redo)"
    return 1
  fi
  echo "$(date +%T) stage $n ($name)"
  return 0
}

stage_done() {  # stage_done N NAME
  mkdir -p "$stage_marks"
  touch "$stage_marks/$1.$2.done"
}
