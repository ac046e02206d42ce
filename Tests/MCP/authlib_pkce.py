"""PKCE with S256 required of every client, for the Authlib authorization servers the MCP tests run
(Tests/MCP/oauth_service.py, Tests/MCP/company_idp.py): Authlib requires it of public clients only."""
from authlib.oauth2.rfc6749 import InvalidRequestError
from authlib.oauth2.rfc7636 import CodeChallenge


class S256Required(CodeChallenge):
    """PKCE with S256 from every client, confidential ones too."""

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge with code_challenge_method=S256 is required")
        super().validate_code_challenge(grant, redirect_uri)
