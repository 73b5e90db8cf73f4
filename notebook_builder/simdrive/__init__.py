"""The simulated Google Drive (tests, benchmarks, `demo --store simdrive`).

    from notebook_builder.simdrive import SimDrive
    with SimDrive(latency=0.15, write_rate=2) as drive:
        root = drive.api_root          # http://127.0.0.1:<port>/ : KY_DRIVE_API

See server.py for what is served and which faults it can make.
"""
from .server import FOLDER_MIME, INITIAL_TOKEN, SimDrive, parse_query, serve

__all__ = ["FOLDER_MIME", "INITIAL_TOKEN", "SimDrive", "parse_query", "serve"]
