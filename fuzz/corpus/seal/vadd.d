vadd.o : /tmp/pact-in/vadd.cu \
    /usr/include/stdc-predef.h \
    /usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h
