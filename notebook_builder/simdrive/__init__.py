"""The simulated Google Drive (tests, benchmarks, `demo --store simdrive`).

    from notebook_builder.simdrive import SimDrive
    with SimDrive(latency=0.15, write_rate=2) as drive:
        root = drive.api_root          # http://127.0.0.1:<port>/ : KY_DRIVE_API
        drive.advance(days=30)         # the Drive's clock: earlier revisions expire by it
        print(drive.held().summary())  # what Drive holds, earlier revisions and trash included

See server.py for what is served and which faults it can make, storage.py for what is kept.
"""
from .server import FOLDER_MIME, INITIAL_TOKEN, SimDrive, parse_query, serve
from .storage import DriveHolding, HeldFile, UploadTally

__all__ = ["FOLDER_MIME", "INITIAL_TOKEN", "DriveHolding", "HeldFile", "SimDrive", "UploadTally", "parse_query",
           "serve"]
