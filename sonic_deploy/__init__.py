"""sonic-deploy: run Cartesia Sonic text-to-speech in your own AWS account."""

__version__ = "0.1.0"
