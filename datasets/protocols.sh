# Sourced by datasets/quality.sh and Tests/Scripts/face_check_rates.sh: the one place that maps an
# app-like protocol of ../shared/eval to the face collection it is cut from.
# protocol_collection SHARED PROTOCOL prints the collection's folder, or fails naming the protocol.
protocol_collection() {
  case $2 in
    orl) echo "$1/datasets/orl_faces" ;;
    cs131) echo "$1/datasets/cs131_celebrity_faces" ;;
    celeba) echo "$1/datasets/celeba_identities/images" ;;
    *) echo "unknown protocol $2 (orl, cs131 or celeba)" >&2; return 1 ;;
  esac
}
