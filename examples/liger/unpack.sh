# Sourced on the GPU machine from the repository root: unpacks pack.sh's DIR (default
# .dist-liger) into .dl/ and sets KVERIFY, KVERIFY_LIB, LD_LIBRARY_PATH and PYTHONPATH.
d=${1:-.dist-liger}
mkdir -p .dl .dl/liger
tar -C .dl -xJf "$d/bin.tar.xz"
tar -C .dl/liger -xJf "$d/liger.tar.xz"
export KVERIFY=$PWD/.dl/kverify KVERIFY_LIB=$PWD/.dl/libkverify_c.so
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.dl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$PWD/python:$PWD/examples/liger:$PWD/.dl/liger/src
