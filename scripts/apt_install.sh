#!/usr/bin/env bash
# scripts/apt_install.sh WHAT PACKAGE... - install Debian/Ubuntu packages that
# WHAT needs: with apt-get when running as root, else print the command and
# exit 1. Used by test.sh and build_handouts.sh.
set -uo pipefail
what=$1; shift
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing $* with apt-get (for $what)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; } ||
    { echo "apt-get could not install $* (for $what)" >&2; exit 1; }
else
  echo "$what needs: sudo apt-get install $*" >&2
  exit 1
fi
