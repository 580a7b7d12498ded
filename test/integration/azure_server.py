"""Azurite, Azure Storage's emulator, on loopback for the Azure integration tests (Blob service
only; installed once from npm by ``scripts/azurite.sh`` into ``~/.cache/lakehouse/npm``).

Azurite checks Shared Key signatures against its well-known development account
(``devstoreaccount1``) and serves path-style URLs (``http://127.0.0.1:PORT/devstoreaccount1/
container/blob``). What it leaves untested: ADLS Gen2's hierarchical namespace (the DFS
endpoint and ``abfss://`` atomic renames: Azurite has no DFS API), Azure AD / managed-identity
credentials, SAS tokens' permissions.

No pytest fixtures here: conftest wires them up.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from loopback import accepts, start_listening, stop_group

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
# Azurite's published development key (its documentation's; not a secret).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_binary() -> Path:
    """``scripts/azurite.sh`` (a no-op when the cache is warm) → the azurite-blob path."""
    out = subprocess.run([str(REPO_ROOT / "scripts" / "azurite.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])



@dataclass
class AzuriteServer:
    process: subprocess.Popen
    port: int

    @classmethod
    def start(cls, root: Path) -> "AzuriteServer":
        binary = azurite_binary()
        root.mkdir(parents=True, exist_ok=True)
        process, port = start_listening(
            lambda port: [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(root),
                          "--silent", "--skipApiVersionCheck", "--loose"],
            accepts, log=subprocess.DEVNULL, what="Azurite")
        return cls(process, port)

    @property
    def blob_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.blob_url}/{ACCOUNT};")

    def environment(self) -> dict[str, str]:
        """What object_store (ours, delta-rs's) reads to reach this emulator."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": self.blob_url,
                "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": KEY}

    def delta_options(self) -> dict[str, str]:
        """deltalake's storage options for this emulator."""
        return {"account_name": ACCOUNT, "account_key": KEY, "use_emulator": "true"}

    def create_container(self, name: str) -> None:
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient.from_connection_string(self.connection_string)
        if not service.get_container_client(name).exists():
            service.create_container(name)

    def stop(self) -> None:
        stop_group(self.process)
