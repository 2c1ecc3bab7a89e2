"""The Allotment Python SDK: a typed client of the HTTP API (httpx + pydantic), importable on its own.

    from allotment.sdk import Client
    with Client.from_env() as allot:          # ALLOT_URL / ALLOT_TOKEN, or the file `allot login` wrote
        job = allot.submit(yaml=open("job.yaml").read()).job
        print(allot.why(job.id).message)

    from allotment.sdk import report_checkpoint    # inside a job, after each saved checkpoint
    report_checkpoint()

Owns: the public names of the SDK. Must not: import the server's packages (api, service, store, engine).
"""

from allotment.sdk import models
from allotment.sdk.checkpoints import report_checkpoint
from allotment.sdk.client import FINAL_STATES, Client
from allotment.sdk.config import DEFAULT_URL, ClientSettings, config_path, read_config, resolve, write_config
from allotment.sdk.errors import UNREACHABLE, ApiError
from allotment.sdk.models import MICRO

__all__ = [
    "DEFAULT_URL",
    "FINAL_STATES",
    "MICRO",
    "UNREACHABLE",
    "ApiError",
    "Client",
    "ClientSettings",
    "config_path",
    "models",
    "read_config",
    "report_checkpoint",
    "resolve",
    "write_config",
]
