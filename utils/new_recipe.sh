#!/usr/bin/env bash
# Starts a recipe for a new corpus: egs/NAME/ as a copy of egs/TEMPLATE (run.sh, conf/, local/) with links
# to the shared path.sh, utils and steps. See README.md, "Adding a corpus".
set -euo pipefail

egs_dir=   # where the recipe goes; empty: the project's egs/
help_message="Usage: utils/new_recipe.sh [--egs-dir DIR] NAME
Writes egs/NAME/ (or DIR/NAME/): run.sh, conf/ (transducer.yaml, deploy.yaml), local/data_prep.py and
RESULTS.md (headings for what each model scored) copied from egs/TEMPLATE, and links to the shared path.sh,
utils and steps. NAME: letters, digits, '_' and '-', starting with a letter or digit; an existing recipe is never
overwritten. Then:
  cd egs/NAME && ./run.sh --corpus-dir /path/to/recordings   # transcripts.txt inside it; see ./run.sh --help"

root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
. "$root/utils/parse_options.sh"

if [ $# -ne 1 ]; then
  printf '%s\n' "$help_message" >&2
  exit 1
fi
name=$1
if ! [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]] || [ "$name" = TEMPLATE ]; then
  echo "new_recipe.sh: '$name' cannot name a recipe: use letters, digits, '_' and '-' (not TEMPLATE)" >&2
  exit 1
fi
egs_dir=${egs_dir:-$root/egs}
dest=$egs_dir/$name
if [ -e "$dest" ] || [ -L "$dest" ]; then
  echo "new_recipe.sh: $dest already exists; choose another name (nothing was written)" >&2
  exit 1
fi
[ -d "$egs_dir" ] || { echo "new_recipe.sh: no folder $egs_dir" >&2; exit 1; }

template=$root/egs/TEMPLATE
mkdir "$dest"
trap 'rm -rf "$dest"; echo "new_recipe.sh: failed; removed $dest" >&2' ERR  # all or nothing
cp "$template/run.sh" "$template/RESULTS.md" "$dest/"
cp -r "$template/conf" "$template/local" "$dest/"
for shared in path.sh utils steps; do  # relative, as the other recipes link them: ../../path.sh in egs/
  ln -s "$(realpath --relative-to="$dest" "$root/$shared")" "$dest/$shared"
done
trap - ERR
echo "new_recipe.sh: wrote $dest (run.sh, conf/, local/data_prep.py, RESULTS.md; path.sh, utils, steps linked)"
printf 'next: cd %q && ./run.sh --corpus-dir /path/to/recordings   (./run.sh --help: the transcript list)\n' "$dest"
