"""The application file for spark-submit:

    spark-submit [spark options] .../kafkalog_tools/spark/submit.py verify --spark PATH...

With no `--master` on the command after it, the session is the one spark-submit configured."""
import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    # run as a script, this directory leads sys.path: its modules must not shadow top-level ones
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    from kafkalog_tools.cli import main

    main()
