"""`ember.backends.openmp`: whether an OpenMP runtime is loaded in this process (threadpoolctl)."""


def is_available() -> bool:
    try:
        import threadpoolctl
    except ImportError:
        return False
    return any(p.get("user_api") == "openmp" for p in threadpoolctl.threadpool_info())
