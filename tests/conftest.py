import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio, which the server's grpc.aio uses too."""
    return "asyncio"
