_balde() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$(balde __complete)" -- "$cur"))
    return
  fi
  if [ "$cur" = "=" ]; then cur=""; fi
  if [ "$prev" = "=" ] && [ "$COMP_CWORD" -ge 2 ]; then prev=${COMP_WORDS[COMP_CWORD-2]}; fi
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(balde __complete "${COMP_WORDS[1]}" flags)" -- "$cur")) ;;
    *)
      words=$(balde __complete "${COMP_WORDS[1]}" next "$prev")
      if [ "$words" = "__files__" ]; then
        COMPREPLY=($(compgen -f -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
      fi ;;
  esac
}
complete -F _balde balde
