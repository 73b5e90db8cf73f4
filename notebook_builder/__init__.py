"""kycourt-colab: archive the Kentucky appellate courts' public record."""
__version__ = "0.1.0"
