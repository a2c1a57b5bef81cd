# Decoding stages for recipes, sourced by run.sh after utils/stages.sh. The model decoded is named by its
# tag (avg5-epoch-40: the last 5 epochs averaged, up to epoch 40; epoch-40: that epoch alone; the names
# come from rnnt.training.checkpoint_names), which every function below takes and none sets. run.sh itself
# decodes with steps/decode.py, into EXP/decode-SET-METHOD-TAG, which decode_result reads:
#   average_stage STAGE EXP AVERAGE             stage STAGE: EXP/avg-N.pt, the last AVERAGE epochs averaged;
#                                               EXP/model.pt links to the model decoded (transcription's default)
#   model_tag=$(model_tag_of EXP AVERAGE)       prints the tag of the model that averaging makes
#   trained_done N NAME EXP                     stage_done of a train stage, its outputs config.yaml and the
#                                               newest epoch checkpoint (none: refused, not marked done)
#   checkpoint_of EXP TAG                       prints the tag's checkpoint file (EXP/avg-5.pt, EXP/epoch-40.pt)
#   decode_stages STAGE EXP TAG LANG "METHODS" "SETS" [ATTENTION]  each set decoded by each method
#                                               (rnnt.search_methods) into EXP/decode-SET-METHOD-TAG (with
#                                               ATTENTION, attention_of's name: at those attention chunks, into
#                                               EXP/decode-SET-METHOD+ATTENTION-TAG), its n-best kept (nbest.json, for
#                                               utils/combination.sh); an LM-fused method (*_lm, *_lodr) first
#                                               gets its LM and weights from lm_fusion_stage, with run.sh's
#                                               $lm_order, $lm_over and lm_beam_of's beam, weighted on data/dev
#                                               among run.sh's $lm_weights and $lm_bonuses where set (else
#                                               steps/tune_lm_fusion.py's grid)
#                                               Where data/dev is in SETS, words' confidences are calibrated on
#                                               it first (confidence_stage). An LM's weights and the calibration
#                                               are chosen at the model's own chunks, whatever ATTENTION
#   confidence_stage STAGE EXP TAG "METHODS"    EXP/confidence_calibration.json for the tag's checkpoint, fitted
#                                               on data/dev with the greedy search of the head of run.sh's
#                                               --methods' first where EXP's model has it, else of METHODS' first
#                                               (steps/calibrate_confidence.py; a dev set all right: none)
#   lm_fusion_stage STAGE EXP TAG LANG METHOD ORDER OVER BEAM DEV SETTINGS  (SETTINGS: decoding_settings EXP's)
#                                               an n-gram LM over LANG's units (OVER units:
#                                               LANG/lm_<ORDER>gram.arpa) or over words (OVER words, searched
#                                               through a lexicon: LANG/lm_word_<ORDER>gram.arpa) from
#                                               data/train/text (ngram_stage), its weight and length bonus (and
#                                               for *_lodr a unit 2-gram's weight) chosen on data/DEV for METHOD
#                                               with beam BEAM into EXP/lm/METHOD-TAG.yaml, which the decodes
#                                               read (with that beam too), and EXP/lm/METHOD.yaml (the newest
#                                               tuning: what decode.py and transcribe.py read by default). Per
#                                               model: another --average tunes its own, never the old one's
#   decode_result LABEL EXP TAG SET METHOD      prints "LABEL <%WER line>", or why there is none; and where this
#                                               run left out a stage whose inputs changed (out_of_date), that
#                                               the result is not one of them
#   check_methods CONFIG "METHODS"              stops run.sh where a model of CONFIG cannot decode with one of
#                                               METHODS (a misspelt name, a CTC search without a CTC head)
#   check_one_method "METHOD"                   stops run.sh where a recipe that decodes one search is given several
#   leading_method "METHODS"                    prints the method that speaks for a model: the first LM-fused
#                                               one of METHODS, else the last
#   export_stage STAGE EXP TAG KIND [ATTENTION]  exports the model for sherpa-onnx (KIND offline or streaming)
#                                               to EXP/onnx-KIND-TAG (EXP/onnx-KIND+ATTENTION-TAG)
#   sherpa_onnx_decode_stage STAGE EXP TAG SET KIND [ATTENTION]  decodes data/SET/data.list with that export in
#                                               sherpa-onnx (method sherpa_onnx_KIND, or sherpa_onnx_KIND+ATTENTION,
#                                               for decode_result), counting the transcripts identical to our
#                                               greedy search's (at the same chunks) where decoded
#   deploy_stages STAGE EXP TAG "KINDS" "SETS" [ATTENTION]  both for each kind: exports at STAGE, decodes at
#                                               STAGE + 1
#   attention=$(attention_of CONFIG)            run.sh's --attention-chunk and --left-chunks (a streaming
#                                               Conformer decoded and exported at other attention chunks than
#                                               its config's, rnnt.attention_chunks) as the name its results get
#                                               (chunk16, whole, chunk2-left32; empty: the config's own, or none
#                                               given); stops run.sh where a model of CONFIG has no chunks
#   attention_options ATTENTION                 prints the options of steps/decode.py and export_onnx.py that
#                                               decode at attention_of's ATTENTION
# With AVERAGE > 0, the last AVERAGE epoch checkpoints of EXP (fewer if fewer were trained) are averaged
# into EXP/avg-N.pt, tagged avgN-epoch-K (K: the newest epoch averaged); with 0, the newest epoch is
# decoded, tagged epoch-K. The tag names the average and decode stages' markers and the decode dirs:
# after more training or with another --average, the new model is averaged and decoded again, beside
# the old results. With no epoch checkpoints yet, the tag is empty; that is an error only if a stage
# from the average stage on is wanted.
# shellcheck shell=bash

model_tag_of() {
  python3 -m rnnt.training.checkpoint_names tag "$1" "$2"
}

trained_outputs() {  # trained_outputs EXP: what a train stage leaves, for its stage_done: config.yaml and the
  # newest epoch checkpoint (deleted, the stage runs again and resumes, or retrains)
  local tag
  tag=$(model_tag_of "$1" 0) || return
  echo "$1/config.yaml"
  checkpoint_of "$1" "$tag"
}

trained_done() {  # trained_done N NAME EXP: stage_done of a train stage, with what it leaves (trained_outputs) as
  # its outputs, one word each whatever spaces EXP's path holds; a training that left no epoch checkpoint is no
  # stage done (marked done, the stages after it found nothing to decode and a rerun skipped the training)
  local listed outputs
  listed=$(trained_outputs "$3") || return  # python3 failing (its message above) is no "left no checkpoint"
  mapfile -t outputs <<< "$listed"
  if [ ${#outputs[@]} -lt 2 ]; then
    echo "$(basename "$0"): stage $1 ($2): the training left no epoch checkpoint in $3 (train.max_steps within" \
      "the first epoch?); the stages after it average and decode epochs" >&2
    return 1
  fi
  stage_done "$1" "$2" "$3" -- "${outputs[@]}"
}

checkpoint_of() {
  [ -z "$2" ] || python3 -m rnnt.training.checkpoint_names path "$1" "$2"  # '': no model yet (average_stage said so)
}

averaged_at_another_stage() {  # averaged_at_another_stage EXP NAME EPOCH...: the average NAME of these epochs, as
  # they are now, made at another stage (a model a training starts from, or a companion, averaged at the training
  # stage: combine_stages asks for it at its average stage)
  local exp=$1 name=$2 mark done_at
  shift 2
  for mark in "$exp"/.stages/*."$name".done; do
    done_at=$(basename "$mark")
    [ -f "$mark" ] && stage_done_before "${done_at%%.*}" "$name" "$exp" -- "$@" && return 0
  done
  return 1
}

average_stage() {
  local from_stage=$1 exp=$2 average=$3 tag averaged n newest name epochs
  tag=$(model_tag_of "$exp" "$average") || return
  if [ -z "$tag" ]; then
    if [ "$stop_stage" -ge "$from_stage" ]; then
      echo "average_stage: no epoch checkpoints in $exp: train first" >&2
      return 1
    fi
    return 0
  fi
  averaged=$(python3 -m rnnt.training.checkpoint_names averaged "$exp" "$tag") || return
  if [ -z "$averaged" ]; then  # --average 0: the newest epoch alone, nothing to average (said: a run of this stage
    # alone ran nothing, and printed the result lines as if it had)
    if [ "$stage" -le "$from_stage" ] && [ "$stop_stage" -ge "$from_stage" ]; then
      echo "$(date +%T) stage $from_stage (average): --average $average: $tag alone, nothing to average"
    fi
    python3 -m rnnt.training.checkpoint_names point "$exp" "$tag"
    return
  fi
  n=$(wc -l <<< "$averaged")
  newest=$(basename "$(tail -n 1 <<< "$averaged")" .pt)
  name=average-$n-$newest
  mapfile -t epochs <<< "$averaged"  # one epoch file a word, whatever spaces its path holds
  if stage_wanted "$from_stage" "$name" "$exp" -- "${epochs[@]}"; then
    logged "$(stage_log "$from_stage" "$name" "$exp")" steps/average_checkpoints.py --last "$n" "$exp" || return
    stage_done "$from_stage" "$name" "$exp" -- "$(checkpoint_of "$exp" "$tag")"
  fi
  if [ -f "$(stage_mark "$from_stage" "$name" "$exp")" ] || averaged_at_another_stage "$exp" "$name" "${epochs[@]}"
  then  # the model the result lines name: model.pt
    python3 -m rnnt.training.checkpoint_names point "$exp" "$tag"
  elif [ "$stop_stage" -gt "$from_stage" ]; then
    echo "average_stage: $(checkpoint_of "$exp" "$tag") is not the average of the last $n epochs up to $newest yet:" \
      "run stage $from_stage first" >&2
    return 1
  fi
}

ngram_arpa() {  # ngram_arpa LANG ORDER OVER: the LM's ARPA file, LANG/lm_5gram.arpa over units,
               # LANG/lm_word_3gram.arpa over words
  if [ "$3" = units ]; then echo "$1/lm_$2gram.arpa"; else echo "$1/lm_word_$2gram.arpa"; fi
}

ngram_stage() {  # ngram_stage STAGE LANG ORDER OVER: builds ngram_arpa's file from data/train's text
  local stage_n=$1 lang=$2 order=$3 over=$4 arpa name units
  arpa=$(ngram_arpa "$lang" "$order" "$over")
  name=$(basename "$arpa" .arpa)
  name=${name/_/-}  # the stage marker as before: lm-5gram, lm-word_3gram
  # the units' files, not units.txt alone: phones spell the text through lexicon.txt, which changes (a
  # pronunciation put first) where the phone set does not
  mapfile -t units < <(unit_files "$lang")
  if stage_wanted "$stage_n" "$name" "$lang" -- data/train/text "${units[0]}" "$order" ++ "${units[@]:1}"; then
    logged "$(stage_log "$stage_n" "$name" "$lang")" steps/build_ngram_lm.py --order "$order" --over "$over" \
      data/train "$lang" "$arpa" || return
    stage_done "$stage_n" "$name" "$lang" -- "$arpa"
  fi
}

lm_fusion_stage() {
  local stage_n=$1 exp=$2 tag=$3 lang=$4 method=$5 order=$6 over=$7 beam=$8 dev=$9 settings=${10} checkpoint arpa
  local lodr=()
  ngram_stage "$stage_n" "$lang" "$order" "$over"
  arpa=$(ngram_arpa "$lang" "$order" "$over")
  case $method in
    *_lodr) ngram_stage "$stage_n" "$lang" 2 units
            lodr=(--lodr-arpa "$(ngram_arpa "$lang" 2 units)") ;;
  esac
  checkpoint=$(checkpoint_of "$exp" "$tag")
  local grid=()  # run.sh's $lm_weights and $lm_bonuses, where set: the points dev chooses among
  [ -z "${lm_weights:-}" ] || grid+=(--weights "$lm_weights")
  [ -z "${lm_bonuses:-}" ] || grid+=(--bonuses "$lm_bonuses")
  local name="lm-fusion-$method-$(basename "$arpa" .arpa)-$tag" weights="$exp/lm/$method-$tag.yaml"
  [ -f "$weights" ] || rm -f "$(stage_mark "$stage_n" "$name" "$exp")"  # done before per-model files: again
  if stage_wanted "$stage_n" "$name" "$exp" -- "$checkpoint" "$arpa" "${lodr[@]}" "data/$dev/data.list" \
      "data/$dev/text" "$beam" "${grid[@]}" ++ "$settings"; then
    logged "$(stage_log "$stage_n" "$name" "$exp")" steps/tune_lm_fusion.py --method "$method" \
      --arpa "$arpa" --over "$over" "${lodr[@]}" --beam "$beam" "${grid[@]}" --checkpoint "$checkpoint" "$exp" \
      "data/$dev/data.list" || return  # on the CPU: its grid on every core (on a GPU, one point at a time)
    cp "$exp/lm/$method.yaml" "$weights"
    stage_done "$stage_n" "$name" "$exp" -- "$weights"
  fi
}

fuses_lm() {  # fuses_lm METHOD: true where METHOD fuses an n-gram LM (rnnt.search_methods names them *_lm, *_lodr)
  case $1 in *_lm|*_lodr) return 0 ;; esac
  return 1
}

CALIBRATION=confidence_calibration.json  # an experiment's (rnnt.confidence.CALIBRATION_FILE): confidence_stage
# writes it, the decodes and the export read it

model_heads() {  # model_heads EXP: the heads of EXP's model ("transducer", "ctc" or both), from its config.yaml
  [ -f "$1/config.yaml" ] || return 0
  python3 -c 'import sys, yaml
loss = (yaml.safe_load(open(sys.argv[1])) or {}).get("model", {}).get("loss") or {}
print("ctc" if loss.get("type") == "ctc" else "transducer ctc" if (loss.get("ctc_weight") or 0) > 0 else "transducer")
' "$1/config.yaml"
}

confidence_stage() {
  local stage_n=$1 exp=$2 tag=$3 method=greedy checkpoint name made=() first head
  # the head of run.sh's --methods' first (one for every decode of the experiment: the seeds' and a combination's
  # decodes of their leading method alone calibrated the other head's, and the two took turns every run), where
  # the model has it; a model of another kind (a CTC companion of a transducer's run), its own methods' first's
  read -r first _ <<< "${methods:-$4}"
  case $first in ctc_*) head=ctc ;; *) head=transducer ;; esac
  [[ " $(model_heads "$exp") " == *" $head "* ]] || read -r first _ <<< "$4"
  case $first in ctc_*) method=ctc_greedy ;; esac
  checkpoint=$(checkpoint_of "$exp" "$tag")
  name=confidence-$method-$tag
  # what decoding reads of the experiment's config an input too (data.tail_silence, which a resume takes: the fit
  # was of the old one, and the decodes and exports after it took it as the new one's)
  if stage_wanted "$stage_n" "$name" "$exp" -- "$checkpoint" data/dev/data.list data/dev/text \
      ++ "$(decoding_settings "$exp")"; then
    logged "$(stage_log "$stage_n" "$name" "$exp")" steps/calibrate_confidence.py --method "$method" \
      --checkpoint "$checkpoint" "$exp" data/dev/data.list || return
    # the calibration, every tag's and head's one file: fitted again for another, this stage runs again
    [ -e "$exp/$CALIBRATION" ] && made=(-- "$exp/$CALIBRATION")
    stage_done "$stage_n" "$name" "$exp" "${made[@]}"
  fi
}

decode_stages() {  # (its METHODS not named methods: confidence_stage reads run.sh's, which a local of that name hid)
  local stage_n=$1 exp=$2 tag=$3 lang=$4 decode_methods=$5 sets=$6 suffix=${7:+"+$7"}
  local checkpoint method set name lm settings chunks
  read -ra chunks <<< "$(attention_options "${7:-}")"
  checkpoint=$(checkpoint_of "$exp" "$tag")
  settings=$(decoding_settings "$exp")  # once for every method and set
  case " $sets " in *" dev "*) confidence_stage "$stage_n" "$exp" "$tag" "$decode_methods" ;; esac
  for method in $decode_methods; do
    lm=()
    if fuses_lm "$method"; then
      lm_fusion_stage "$stage_n" "$exp" "$tag" "$lang" "$method" "$lm_order" "$lm_over" "$(lm_beam_of "$method")" \
        dev "$settings"
      lm=(--lm-fusion "$exp/lm/$method-$tag.yaml")
    fi
    for set in $sets; do
      name=decode-$set-$method$suffix-$tag
      # the LM an input too (another --lm-order or --lm-over with the decodes left out marks the results as old),
      # what decoding reads of the experiment's config that a resumed training changes, and the calibration of
      # its words' confidences (fitted again on an edited dev, test's decode was skipped, its confidences old)
      if stage_wanted "$stage_n" "$name" "$exp" -- "$checkpoint" "data/$set/data.list" "data/$set/text" "${lm[@]}" \
          ${lm[0]:+"$(ngram_arpa "$lang" "$lm_order" "$lm_over")"} --nbest ++ "$settings" "$exp/$CALIBRATION"; then
        logged "$(stage_log "$stage_n" "$name" "$exp")" steps/decode.py --method "$method" --checkpoint "$checkpoint" \
          --tag "$tag" "${lm[@]}" "${chunks[@]}" --device auto \
          --nbest "$exp" "data/$set/data.list" "$set" || return  # --device auto: a GPU where at hand
        stage_done "$stage_n" "$name" "$exp" -- "$exp/$name/wer"
      fi
    done
  done
}

decoding_settings() {  # decoding_settings EXP: what decoding reads of EXP/config.yaml that a resumed training
  # can change without a new checkpoint (data.tail_silence), one word: a decode or export stage's input
  [ -f "$1/config.yaml" ] || return 0  # not trained yet: the stage is not run, or says so itself
  python3 -m rnnt.training.config_inputs --decoding "$1"
}

check_methods() {  # check_methods CONFIG "METHODS": run.sh stops now where a model of CONFIG could not decode with one
  # of METHODS (a misspelt name; a CTC search of a model without a CTC head), not at its decode stage after training
  # shellcheck disable=SC2086
  python3 -m rnnt.search_methods "$1" $2 || exit 1
}

check_one_method() {  # check_one_method "METHOD": a recipe that decodes one search (yesno, fsdd) stops now where
  # given several (check_methods takes them, and its decode stage failed on them after training)
  if [[ "$1" == *[[:space:]]* ]]; then
    echo "run.sh: --method takes one search, not '$1' (this recipe decodes one; run it again for another)" >&2
    exit 1
  fi
}

check_no_lm_methods() {  # check_no_lm_methods "METHODS": a recipe without an LM stage (yesno, fsdd, librispeech) stops
  # now where one of METHODS fuses an LM: its decode stage would find no LM weights, or an exp's stale ones from by hand
  local method
  for method in $1; do
    if fuses_lm "$method"; then
      echo "run.sh: --method $method fuses an n-gram LM, which this recipe does not build (an4 and speechocean762" \
        "do, and recipes made from egs/TEMPLATE)" >&2
      exit 1
    fi
  done
}

leading_method() {
  local method last=
  for method in $1; do
    if fuses_lm "$method"; then echo "$method"; return; fi
    last=$method  # the last word, whatever blanks are around the words ("greedy beam " gave none)
  done
  echo "$last"
}

decode_result() {
  local label=$1 exp=$2 tag=$3 set=$4 method=$5
  local wer_file=$exp/decode-$set-$method-$tag/wer per_file=$exp/decode-$set-$method-$tag/per
  if [ -z "$tag" ]; then
    echo "$label not decoded yet (no model in $exp)"
  elif [ -f "$wer_file" ]; then  # phone units: the phone error rate too
    echo "$label $(cat "$wer_file")$([ ! -f "$per_file" ] || echo "; $(cat "$per_file")")"
    local entry behind=()  # the stages left out whose inputs changed, but another decode's (not this line's)
    for entry in "${out_of_date[@]}"; do
      [[ $entry == *"(decode-"* && $entry != *"(decode-$set-$method-$tag in $exp)"* ]] || behind+=("$entry")
    done
    if [ ${#behind[@]} -gt 0 ]; then  # a run that left out a stage whose inputs changed: not a result of them
      entry=$(printf '%s; ' "${behind[@]}")
      echo "  (from before your changes: ${entry%; }; left out by --stage/--stop-stage, has other inputs now)"
    fi
  else
    echo "$label not decoded yet ($wer_file missing)"
  fi
}

export_stage() {
  local stage_n=$1 exp=$2 tag=$3 kind=$4 suffix=${5:+"+$5"} option= checkpoint chunks
  local name=export-$kind$suffix-$tag onnx=$exp/onnx-$kind$suffix-$tag
  read -ra chunks <<< "$(attention_options "${5:-}")"
  case $kind in
    offline) ;;
    streaming) option=--streaming ;;
    *) echo "export_stage: unknown export kind '$kind' (offline or streaming)" >&2; return 1 ;;
  esac
  checkpoint=$(checkpoint_of "$exp" "$tag")
  # the calibration the export carries into its decoding.json (fitted again, or for another model since: exported again)
  if stage_wanted "$stage_n" "$name" "$exp" -- "$checkpoint" ++ "$(decoding_settings "$exp")" "$exp/$CALIBRATION"
  then
    logged "$(stage_log "$stage_n" "$name" "$exp")" steps/export_onnx.py $option "${chunks[@]}" \
      --checkpoint "$checkpoint" "$exp" "$onnx" || return
    stage_done "$stage_n" "$name" "$exp" -- "$onnx"
  fi
}

sherpa_onnx_decode_stage() {
  local stage_n=$1 exp=$2 tag=$3 set=$4 kind=$5 suffix=${6:+"+$6"} compare=()
  local onnx=$exp/onnx-$kind$suffix-$tag ours=$exp/decode-$set-greedy$suffix-$tag
  local name=decode-$set-sherpa_onnx_$kind$suffix-$tag
  [ -f "$ours/hyp" ] && compare=(--compare "$ours")
  if stage_wanted "$stage_n" "$name" "$exp" -- "$onnx" "data/$set/data.list" "data/$set/text"; then
    logged "$(stage_log "$stage_n" "$name" "$exp")" steps/decode_sherpa_onnx.py \
      "${compare[@]}" "$onnx" "data/$set/data.list" "$exp/$name" || return
    stage_done "$stage_n" "$name" "$exp" -- "$exp/$name/wer"
  fi
}

deploy_stages() {
  local stage_n=$1 exp=$2 tag=$3 kinds=$4 sets=$5 attention=${6:-} kind set
  for kind in $kinds; do
    export_stage "$stage_n" "$exp" "$tag" "$kind" "$attention"
    for set in $sets; do
      sherpa_onnx_decode_stage $((stage_n + 1)) "$exp" "$tag" "$set" "$kind" "$attention"
    done
  done
}

attention_of() {
  [ -n "${attention_chunk:-}${left_chunks:-}" ] || return 0
  python3 -m rnnt.attention_chunks "$1" ${attention_chunk:+--attention-chunk "$attention_chunk"} \
    ${left_chunks:+--left-chunks "$left_chunks"}
}

attention_options() {  # the inverse of rnnt.attention_chunks.AttentionChunks.name: parts chunkN, whole, leftL
  local part
  for part in ${1//-/ }; do
    case $part in
      whole) printf '%s ' --attention-chunk whole ;;
      chunk*) printf '%s ' --attention-chunk "${part#chunk}" ;;
      left*) printf '%s ' --left-chunks "${part#left}" ;;
    esac
  done
}
